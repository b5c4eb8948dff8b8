// Package importer converts the session logs of other coding agents
// (Claude Code, Codex, pi) into panto sessions, and appends them to a
// store incrementally.
//
// A converter reads a foreign log line by line and folds it into a
// deterministic sequence of batches of panto's line format
// (internal/sessionlog): the same input bytes convert to the same output
// bytes, on any machine. The conversion of a log is a prefix of the
// conversion of the same log grown by more lines, because a converter
// never looks ahead: a message is written only once it is complete, and
// what completes it is a later line, not the end of the file. So:
//
//   - an assistant message is held until the line that closes it (its
//     stop reason, the next message, or the agent's end-of-response
//     record); one that calls tools is held until every call has its
//     result, and then written with the results as one batch, as panto
//     itself writes them (agent's package doc): a stored session is
//     always valid on the wire;
//   - calls whose results never come (the next message arrives first)
//     are closed with an error result saying so; results that answer no
//     open call are dropped;
//   - a torn last line (the agent is writing it) is not read; a complete
//     line that does not parse refuses the whole file, naming file:line.
//
// Importing is then a comparison with what the store holds (Apply): the
// stored log is a prefix of the new conversion (append the rest at the
// stored checkpoint), equal to it (nothing to do), that with title
// entries panto wrote between its batches (append the rest after them:
// afterTitles), or neither (an earlier panto converted it otherwise, the
// source changed below what was imported, or the session was continued
// in panto: a divergence, left as it is until an import with Replace
// writes the new conversion as the session that replaces it: Import,
// replace.go). The
// header is the one line that may differ between two imports of a log: its
// project is what the importing machine's disk says of the directory
// (WithProject), and a session is appended to under the header stored
// first, whichever project that says (project.go). The panto
// id of a session is derived from the agent and its own id of the
// session (SessionID), so that importing twice, or from two machines,
// names the same session.
//
// One file per agent (claudecode.go, codex.go, pi.go) maps its records
// onto panto's blocks; builder.go holds the rules above; detect.go finds
// the logs and tells the formats apart.
package importer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
)

// Agent names the agent a log comes from.
type Agent string

// The agents whose logs import.
const (
	ClaudeCode Agent = "claude-code"
	Codex      Agent = "codex"
	Pi         Agent = "pi"
)

// Agents lists every agent, in the order imports visit their locations.
var Agents = []Agent{ClaudeCode, Codex, Pi}

// ParseAgent returns the agent of a --from value.
func ParseAgent(s string) (Agent, error) {
	for _, a := range Agents {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown agent %q: want claude-code, codex or pi", s)
}

// ErrMalformed: a complete line of a foreign log cannot be read as a
// record of its format.
var ErrMalformed = errors.New("malformed log")

// Conversion is a foreign log converted to panto's line format.
type Conversion struct {
	Agent Agent
	// ForeignID is the agent's id of the session ("<session>/<agent>" for
	// a subagent transcript); ID the panto session id.
	ForeignID string
	ID        string
	// Log is the converted log: whole batches, from the header on. It is
	// empty when no message of the source is complete yet.
	Log []byte
	// Messages is the number of message lines in Log.
	Messages int
	// Project is the project Log's header records: what the log says of
	// where the agent ran (Codex's remote, else the directory), or what
	// WithProject set.
	Project agent.Project
	// others are the same lines under the headers an earlier import may
	// have stored (another project: the log's alone, or what an earlier
	// panto took from it), which a session it imported grows from, since
	// a header never changes.
	others [][]byte
	// earlier, when set, converts the log as earlier pantos did, where
	// that differs (codexEarlier): a session one of them imported grows
	// in that form (decide), unless the import replaces it.
	earlier func() []*Conversion
	// Stats counts what the conversion kept and dropped.
	Stats Stats
	// ExportOf is the panto session a log panto exported holds, when the
	// other agent added no message to it (package exporter): nothing to
	// import. Once it did, the conversion is a fork of that session.
	ExportOf string
}

// Stats counts what a conversion did with the source's records.
type Stats struct {
	// ToolCalls and ToolResults are the calls and results written.
	ToolCalls, ToolResults int
	// ClosedCalls are calls written with an error result because the
	// source has none; DroppedResults results that answer no open call.
	ClosedCalls, DroppedResults int
	// Held says that messages read wait for later lines (a response in
	// progress, calls without their results yet); HeldCalls and HeldUsage
	// are the calls and usage they hold.
	Held      bool
	HeldCalls int
	HeldUsage agent.Usage
}

// SessionID returns the panto session id of a foreign session: 32 hex
// digits of a hash of the agent and its id, so that every import of the
// session, from any machine, names the same panto session.
func SessionID(a Agent, foreignID string) string {
	sum := sha256.Sum256([]byte("panto import\x00" + string(a) + "\x00" + foreignID))
	return hex.EncodeToString(sum[:16])
}

// Convert converts the log data of agent a; name is used in errors
// (file:line). data may end in a torn line, which is not read.
func Convert(a Agent, name string, data []byte) (*Conversion, error) {
	var conv converter
	switch a {
	case ClaudeCode:
		conv = newClaudeCode()
	case Codex:
		conv = newCodex()
	case Pi:
		conv = newPi()
	default:
		return nil, fmt.Errorf("convert %s: unknown agent %q", name, a)
	}
	c, err := convert(conv, a, name, data)
	if err != nil {
		return nil, err
	}
	if a == Pi {
		return piForked(name, data, c)
	}
	if a == ClaudeCode {
		if f := claudeCodeFork(data); f.parent != "" {
			return claudeCodeForked(name, data, c, f)
		}
	}
	if a == Codex {
		c.earlier = func() []*Conversion {
			var out []*Conversion
			for _, rules := range codexEarlier {
				e, err := convert(&codex{b: newBuilder(Codex), rules: rules}, a, name, data)
				if err == nil && len(e.Log) > 0 && !bytes.Equal(e.Log, c.Log) {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return c, nil
}

// convert reads data with conv into its conversion.
func convert(conv converter, a Agent, name string, data []byte) (*Conversion, error) {
	b := conv.builder()
	b.fallbackID = logStem(name)
	// A conversion is most of its log's size (a large log's is mostly
	// tool results, kept whole): grown once, not by doubling, it does
	// not leave the log's size again in garbage behind it.
	b.out.Grow(len(data))
	lineNo := 0
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn: the agent is writing it
		}
		line := bytes.TrimSpace(data[:i])
		data = data[i+1:]
		lineNo++
		if len(line) == 0 {
			continue
		}
		if err := conv.line(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w: %v", name, lineNo, ErrMalformed, err)
		}
		if b.err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, lineNo, b.err)
		}
	}
	c := b.result(a)
	if h, ok := conv.(interface{ heldUsage() agent.Usage }); ok {
		c.Stats.HeldUsage.Add(h.heldUsage())
	}
	return c, nil
}

// logStem is a log's file name without its extensions: the session's
// id when the log has no record naming it (a part of a log). For pi's
// <time>_<uuid> names, the uuid.
func logStem(name string) string {
	base := filepath.Base(name)
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".zst"), ".jsonl")
	if i := strings.LastIndexByte(base, '_'); i >= 0 && i+1 < len(base) && strings.Count(base[i+1:], "-") == 4 {
		base = base[i+1:]
	}
	return base
}

// converter is one agent's reading of its lines into a builder.
type converter interface {
	builder() *builder
	// line reads one complete, non-empty line.
	line(line []byte) error
}

// Decompress returns the content of a zstd-compressed log (Codex's
// .jsonl.zst). A stream cut short (the agent is writing it) returns what
// could be decoded: the torn end is left for the next import.
func Decompress(data []byte) ([]byte, error) {
	d, err := zstd.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	out, err := io.ReadAll(d)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && len(out) == 0 {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return out, nil
}
