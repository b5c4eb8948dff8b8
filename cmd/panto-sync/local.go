package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/panto-dev/panto/internal/sessionlog"
)

// LocalCatalog is what sync needs of the local catalog; *fsjsonl.Store
// implements it.
type LocalCatalog interface {
	// Path is the file of session id (an invalid id is an error).
	Path(id string) (string, error)
	// AppendRaw appends data to session id if its committed length is
	// expectLength (0: creates the file atomically).
	AppendRaw(ctx context.Context, id string, expectLength int64, data []byte) error
	// IDs lists the sessions of the catalog.
	IDs(ctx context.Context) ([]string, error)
}

// scanLocal brings the state of session id, whose file is path, up to
// date with the file, reading only what changed since prev (nil: no
// state). The result's Committed is 0 when the file is missing or has no
// committed line.
//
// The committed part is found from the end (sessionlog.CommittedLength,
// which reports a malformed line it meets); with validate, every new
// line is decoded too. Push does not need that: the object store decodes
// every line it is given and refuses a malformed one before it writes
// anything, and push then names the file and line (validateFile). Status
// and --dry-run, which write nothing, validate here.
func scanLocal(id, path string, prev *SessionState, validate bool) (*SessionState, error) {
	st, read, _, err := scanFile(id, path, prev, validate)
	putFileBuffer(read)
	return st, err
}

// scanFile is scanLocal that also returns the committed bytes it read,
// read = file[from:st.Committed] (nil when it read nothing), in a buffer
// of fileBuffers that the caller hands back with putFileBuffer once done
// with it: push sends what the scan read without reading it again.
func scanFile(id, path string, prev *SessionState, validate bool) (st *SessionState, read []byte, from int64, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return &SessionState{Size: -1}, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	next := &SessionState{}
	if prev != nil {
		next.SyncedLength, next.SyncedSHA256, next.Forks = prev.SyncedLength, prev.SyncedSHA256, prev.Forks
		if prev.Size >= 0 && prev.Size == fi.Size() && prev.MtimeNS == fi.ModTime().UnixNano() {
			c := *prev
			return &c, nil, 0, nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()

	// Resume from the old committed prefix when the file can still hold
	// it and it still ends a line there.
	h := sha256.New()
	var start int64
	lines := 0
	if prev != nil && prev.Committed > 0 && fi.Size() >= prev.Committed && endsLine(f, prev.Committed) {
		if u, ok := h.(encoding.BinaryUnmarshaler); ok && u.UnmarshalBinary(prev.Hasher) == nil {
			start, lines = prev.Committed, prev.Lines
		} else {
			h.Reset()
		}
	}
	// Read the tail in one buffer of the size stat gave (io.ReadAll would
	// grow and copy it a dozen times for a large file). A file that
	// shrank meanwhile reads short; one that grew is read again next time.
	tail := getFileBuffer(fi.Size() - start)
	k, err := io.ReadFull(io.NewSectionReader(f, start, fi.Size()-start), tail)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		putFileBuffer(tail)
		return nil, nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	tail = tail[:k]
	fail := func(err error) (*SessionState, []byte, int64, error) {
		putFileBuffer(tail)
		return nil, nil, 0, err
	}
	n, err := sessionlog.CommittedLength(path, tail)
	if err != nil {
		if start > 0 {
			return fail(lineError(path, f, err)) // with the line number counted from the top
		}
		return fail(err)
	}
	if start == 0 && n > 0 {
		if err := checkHeader(path, id, tail); err != nil {
			return fail(err)
		}
	}
	if validate {
		if err := validateLog(path, id, lines, start > 0, tail[:n]); err != nil {
			return fail(err)
		}
	}
	h.Write(tail[:n])
	next.Committed = start + int64(n)
	next.SHA256 = hex.EncodeToString(h.Sum(nil))
	next.Hasher, err = marshalHasher(h)
	if err != nil {
		return fail(err)
	}
	next.Lines = lines + countLines(tail[:n])
	next.Size, next.MtimeNS = fi.Size(), fi.ModTime().UnixNano()
	if start+int64(len(tail)) != fi.Size() { // changed while read: read it again next time
		next.Size = -1
	}
	return next, tail[:n], start, nil
}

// checkHeader checks that the log's first line is the header of session
// id.
func checkHeader(path, id string, log []byte) error {
	var d sessionlog.Decoder
	d.Name = path
	line := log[:bytes.IndexByte(log, '\n')]
	if _, _, err := d.DecodeLine(line); err != nil {
		return err
	}
	if d.Header.ID != id {
		return fmt.Errorf("%s:1: the header names session %q, not %q: rename the file to %s.jsonl or fix its header", path, d.Header.ID, id, d.Header.ID)
	}
	return nil
}

// validateLog decodes every line of data, which follows `lines` lines
// of the log (the header among them when resumed).
func validateLog(path, id string, lines int, resumed bool, data []byte) error {
	d := sessionlog.Decoder{Name: path, Line: lines}
	if resumed {
		d.Header = &sessionlog.Header{ID: id} // the header was checked when the prefix was read
	}
	return sessionlog.Lines(data, func(line []byte) error {
		_, err := d.SummarizeLine(line)
		return err
	})
}

// validateFile decodes every committed line of path, to name the file
// and line of what the object store refused.
func validateFile(path, id string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	n, err := sessionlog.CommittedLength(path, data)
	if err != nil {
		return err
	}
	return validateLog(path, id, 0, false, data[:n])
}

// lineError re-reads the whole file to report a malformed line with its
// line number counted from the top of the file.
func lineError(path string, f *os.File, tailErr error) error {
	all, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		return tailErr
	}
	if _, err := sessionlog.CommittedLength(path, all); err != nil {
		return err
	}
	return tailErr
}

// endsLine reports whether the byte before offset n of f is a newline.
func endsLine(f *os.File, n int64) bool {
	var b [1]byte
	_, err := f.ReadAt(b[:], n-1)
	return err == nil && b[0] == '\n'
}

func marshalHasher(h hash.Hash) ([]byte, error) {
	m, ok := h.(encoding.BinaryMarshaler)
	if !ok {
		return nil, errors.New("sha256 state cannot be saved")
	}
	return m.MarshalBinary()
}

// resumeHasher returns a sha256 that has already hashed the prefix whose
// marshalled state is saved.
func resumeHasher(saved []byte) (hash.Hash, error) {
	h := sha256.New()
	if len(saved) == 0 {
		return h, nil
	}
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(saved); err != nil {
		return nil, fmt.Errorf("resume sha256: %w", err)
	}
	return h, nil
}

// readRange reads n bytes of path from offset off.
func readRange(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("read %s [%d:%d]: %w", path, off, off+n, err)
	}
	return buf, nil
}

// prefixSHA256 is the hex sha256 of the first n bytes of path.
func prefixSHA256(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if got, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil || got != n {
		return "", fmt.Errorf("read %s: %d of %d bytes: %v", path, got, n, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// countLines counts the lines of b.
func countLines(b []byte) int { return bytes.Count(b, []byte{'\n'}) }
