package importer

import (
	"bytes"
	"encoding/json"
)

// A fork of Codex 0.171's paginated history (codex fork, codex exec
// fork) holds none of its parent's lines: its session_meta names the
// parent and the ordinal of the parent's first line it did not take
// (forked_from_ordinal_exclusive), and Codex, resuming it, reads the
// parent's lines before that from the parent's own rollout. Converted
// alone, the fork is its own turns only, and a panto that continues it
// sends the model none of what came before. ConvertLinked converts it as
// a panto fork: the parent's messages before the fork point, copied
// (forked_at their number, so that usage counts them in the parent),
// then the fork's own. The parent's lines before the fork point never
// change, so the conversion stays prefix-stable; where the parent's log
// is not found it is the fork alone, and an import that stored that form
// goes on in it.

// ParentLog finds the log of another session of the same agent by that
// agent's id of it (false: not found).
type ParentLog func(foreignID string) ([]byte, bool)

// ConvertLinked is Convert, with a Codex fork's parent's messages before
// the fork point copied in front of its own when parentLog finds the
// parent's log.
func ConvertLinked(a Agent, name string, data []byte, parentLog ParentLog) (*Conversion, error) {
	c, err := Convert(a, name, data)
	if err != nil || a != Codex || parentLog == nil || len(c.Log) == 0 {
		return c, err
	}
	parent, at := codexForkPoint(data)
	if parent == "" || at <= 0 {
		return c, nil
	}
	pdata, ok := parentLog(parent)
	if !ok {
		return c, nil
	}
	prefix, ok := codexLinesBefore(pdata, at)
	if !ok {
		return c, nil
	}
	pc, err := Convert(Codex, name, prefix)
	if err != nil || pc.Stats.Held || pc.Messages == 0 {
		return c, nil // not a parent this conversion can copy from
	}
	meta, rest, _ := bytes.Cut(data, []byte{'\n'})
	linked := append(append(append([]byte{}, meta...), '\n'), withoutSessionMeta(prefix)...)
	linked = append(linked, rest...)
	lc, err := convert(&codex{b: newBuilder(Codex), forkedAt: pc.Messages}, Codex, name, linked)
	if err != nil || lc.Messages < pc.Messages {
		return c, nil
	}
	// The fork alone is a form an import may have stored (the parent's
	// log was not found then, or an earlier panto did not look): a
	// session stored so grows in it, as in an earlier panto's form, and
	// an import that replaces those replaces it by this one, which a
	// model continuing it in panto is sent the parent's messages of.
	alone := c
	lc.earlier = func() []*Conversion {
		out := []*Conversion{alone}
		if alone.earlier != nil {
			out = append(out, alone.earlier()...)
		}
		return out
	}
	return lc, nil
}

// codexForkPoint reads a rollout's first line: the parent a fork of
// paginated history names, and the ordinal it forked before ("", 0: not
// such a fork).
func codexForkPoint(data []byte) (string, int64) {
	first, _, _ := bytes.Cut(data, []byte{'\n'})
	var l struct {
		Type    string `json:"type"`
		Payload struct {
			ForkedFromID      string `json:"forked_from_id"`
			ForkedFromOrdinal int64  `json:"forked_from_ordinal_exclusive"`
		} `json:"payload"`
	}
	if json.Unmarshal(first, &l) != nil || l.Type != "session_meta" {
		return "", 0
	}
	return l.Payload.ForkedFromID, l.Payload.ForkedFromOrdinal
}

// codexLinesBefore is the whole lines of a rollout whose ordinal is
// below at; false when a line has none (not paginated history) or the
// log does not reach at (the parent is not all there yet).
func codexLinesBefore(data []byte, at int64) ([]byte, bool) {
	end, last := 0, int64(-1)
	for end < len(data) {
		i := bytes.IndexByte(data[end:], '\n')
		if i < 0 {
			break // torn: the agent is writing it
		}
		var l struct {
			Ordinal *int64 `json:"ordinal"`
		}
		if json.Unmarshal(data[end:end+i], &l) != nil || l.Ordinal == nil {
			return nil, false
		}
		if *l.Ordinal >= at {
			return data[:end], true
		}
		last = *l.Ordinal
		end += i + 1
	}
	return data[:end], last == at-1
}

// withoutSessionMeta is lines without their session_meta line.
func withoutSessionMeta(lines []byte) []byte {
	var out []byte
	for len(lines) > 0 {
		line, rest, _ := bytes.Cut(lines, []byte{'\n'})
		lines = rest
		var l struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &l) == nil && l.Type == "session_meta" {
			continue
		}
		out = append(append(out, line...), '\n')
	}
	return out
}
