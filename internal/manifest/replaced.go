package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// A compaction of a long session replaces hundreds of objects an hour,
// and each must stay until no reader can hold a manifest naming it
// (§P5). Recorded one pending delete each, they made the manifest, which
// a writer rewrites every few appends, grow with the session's pace: 110
// KB after 200 turns of six messages in an hour. So a compaction that
// replaces more than a few lists their names in an object of its own and
// records one pending delete naming that list.

// ReplacedListName is the name of the object listing names, relative
// to the session's directory: under seg/ with the objects it names (a
// panto that predates lists accepts a pending delete of it, and deletes
// the list alone), and named by its content's hash, so that two writers
// compacting the same manifest write the same object, and a list is
// checked against its name when read.
func ReplacedListName(names []string) string {
	sum := sha256.Sum256(replacedListBytes(names))
	return replacedListPrefix + hex.EncodeToString(sum[:16]) + replacedListSuffix
}

const (
	replacedListPrefix = "seg/replaced-"
	replacedListSuffix = ".txt.zst"
)

// IsReplacedList reports whether name (relative to the session's
// directory) is a ReplacedListName.
func IsReplacedList(name string) bool {
	hexPart, ok := strings.CutPrefix(name, replacedListPrefix)
	if !ok {
		return false
	}
	hexPart, ok = strings.CutSuffix(hexPart, replacedListSuffix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

func replacedListBytes(names []string) []byte {
	var b bytes.Buffer
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// EncodeReplacedList returns the stored form of the list of names, the
// object called name (its ReplacedListName under the session): one name
// a line, compressed (and sealed) as a segment is.
func (c *Codec) EncodeReplacedList(name string, names []string) []byte {
	return c.EncodeSegment(name, replacedListBytes(names))
}

// DecodeReplacedList returns the names listed in the stored object
// called name (its key: what it was sealed under), rel being that name
// relative to the session's directory.
// The list must be what rel's hash says, and every name a segment's
// (SegmentName or MergedName): a damaged list deletes nothing.
func (c *Codec) DecodeReplacedList(name, rel string, data []byte) ([]string, error) {
	raw, err := c.DecodeSegment(name, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	names, err := ParseReplacedList(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if ReplacedListName(names) != rel {
		return nil, fmt.Errorf("%s: %w: the list is not the one its name was made from", name, ErrInvalid)
	}
	return names, nil
}

// ParseReplacedList parses a list of replaced objects (one name a line,
// each ending in a newline), every one a SegmentName or a MergedName.
func ParseReplacedList(raw []byte) ([]string, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: empty list of replaced objects", ErrInvalid)
	}
	if raw[len(raw)-1] != '\n' {
		return nil, fmt.Errorf("%w: list of replaced objects does not end in a newline", ErrInvalid)
	}
	lines := strings.Split(string(raw[:len(raw)-1]), "\n")
	for i, n := range lines {
		if !isSegmentName(n) {
			return nil, fmt.Errorf("%w: list of replaced objects: line %d is not a segment's name", ErrInvalid, i+1)
		}
	}
	return lines, nil
}

// isSegmentName reports whether name is a SegmentName or a MergedName.
// IsAppendedSegmentName reports whether name is an appended segment's
// (SegmentName), not a merged one's: the name an appender creates.
func IsAppendedSegmentName(name string) bool {
	digits, ok := strings.CutPrefix(name, "seg/")
	if !ok {
		return false
	}
	digits, ok = strings.CutSuffix(digits, ".jsonl.zst")
	return ok && isOffset(digits)
}

func isSegmentName(name string) bool {
	rest, ok := strings.CutPrefix(name, "seg/")
	if !ok {
		return false
	}
	if digits, ok := strings.CutSuffix(rest, ".c.jsonl.zst"); ok {
		start, end, ok := strings.Cut(digits, "-")
		return ok && isOffset(start) && isOffset(end)
	}
	digits, ok := strings.CutSuffix(rest, ".jsonl.zst")
	return ok && isOffset(digits)
}

// isOffset reports whether s is an offset as segment names spell it:
// twenty decimal digits.
func isOffset(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
