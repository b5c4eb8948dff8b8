package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// putNewer stores log, a session's committed bytes whose header names a
// newer line format, as session id under the env's prefix the way a
// newer panto would: its first segment and, with withManifest, a
// manifest whose decoder state says that format (a newer panto writes
// one after 8 segments; the manifest is then all an appender reads of the
// log's start). It returns a reader of every object of the session (names
// and bytes), to show that a refused append wrote nothing.
func putNewer(t *testing.T, e *env, id string, log []byte, withManifest bool) func() []byte {
	t.Helper()
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	comp := codec.Compress(log)
	put := func(name string, data []byte) { t.Helper(); e.putRaw(t, e.key("sessions/"+id+"/"+name), data) }
	put(manifest.SegmentName(0), comp)
	if withManifest {
		put("manifest.json", newerManifest(t, id, log, int64(len(comp))))
	}
	return func() []byte {
		var all []byte
		for _, o := range e.rawBucket(t) { // in key order
			if strings.HasPrefix(o.key, e.key("sessions/"+id+"/")) {
				all = fmt.Appendf(all, "%s %d\n%s\n", o.key, len(o.data), o.data)
			}
		}
		return all
	}
}

// newerManifest is the manifest of a one-segment log in a newer line
// format: it is folded from the same log spelled in this format (the
// header's version is its only difference, of the same width), then
// given the newer log's hashes and the newer header's version.
func newerManifest(t *testing.T, id string, log []byte, compressed int64) []byte {
	t.Helper()
	newer, cur := fmt.Sprintf(`"version":%d,`, sessionlog.Version+1), fmt.Sprintf(`"version":%d,`, sessionlog.Version)
	if len(newer) != len(cur) {
		t.Fatalf("%s and %s differ in width", newer, cur)
	}
	m := manifest.New(id)
	if _, err := m.Append("newer", bytes.Replace(log, []byte(newer), []byte(cur), 1), compressed); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(log)
	sum := hex.EncodeToString(h.Sum(nil))
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m.SHA256, m.HashState = sum, st
	m.Segments[0].SHA256, m.Segments[0].PrefixSHA256 = sum, sum
	m.Decoder.Header.Version = sessionlog.Version + 1
	data, err := manifest.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), fmt.Sprintf(`"format":%d`, sessionlog.Version+1)) {
		t.Fatalf("the manifest does not name format %d: %s", sessionlog.Version+1, data)
	}
	return data
}

// TestAppendNewerFormat: a session a newer panto wrote, of one segment and
// no manifest, takes no append: the appender learns the format from the
// header it probes. (The conformance suite checks the session with a
// manifest, which is all an appender reads of the log's start, on every
// server.)
func TestAppendNewerFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t)
	id := agent.NewSessionID()
	cur, newer := fmt.Sprintf(`"version":%d,`, sessionlog.Version), fmt.Sprintf(`"version":%d,`, sessionlog.Version+1)
	first, _ := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{user("a newer panto's")}, t0)
	log := bytes.Replace(first, []byte(cur), []byte(newer), 1)
	stored := putNewer(t, e, id, log, false)
	before := stored()
	checkNewer := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sessionlog.ErrNewerVersion) || errors.Is(err, objstore.ErrCorrupt) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "upgrade panto") {
			t.Errorf("%s: %v, want one line saying the session is of a newer format (not corrupt), to upgrade panto", what, err)
		}
	}
	checkNewer("AppendMessages", s.AppendMessages(ctx, id, []agent.PersistentMessage{user("mine")}))
	more, _ := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("pulled")}, t0)
	_, err := e.open(t).AppendLog(ctx, id, store.Checkpoint{Length: int64(len(log)), SHA256: sum(log)}, more)
	checkNewer("AppendLog", err)
	if after := stored(); !bytes.Equal(after, before) {
		t.Errorf("refused appends changed the session's objects:\n%s\nwere:\n%s", after, before)
	}
}
