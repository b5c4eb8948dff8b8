package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// The raw-log vocabulary of package store, for the stores that speak it:
// Run calls these when the Harness's store is a store.LogStore. They check
// what sync relies on: listed checkpoints are the hashes of the bytes
// ReadLog returns, AppendLog writes only at its checkpoint and is
// idempotent, malformed data never gets in, the optional prefix hashes
// are right, and a log copied raw from one store to another reads back
// the same.

func runLogStore(t *testing.T, h Harness) {
	if _, ok := store.AsLogStore(h.New(t)); !ok {
		return
	}
	logStore := func(t *testing.T) store.LogStore { return asLogStore(t, h.New(t)) }
	t.Run("LogsAndReadLog", func(t *testing.T) { testLogsAndReadLog(t, h, logStore(t)) })
	t.Run("AppendLog", func(t *testing.T) { testAppendLog(t, h, logStore(t)) })
	t.Run("AppendLogRefuses", func(t *testing.T) { testAppendLogRefuses(t, logStore(t)) })
	t.Run("PrefixCheckpoint", func(t *testing.T) { testPrefixCheckpoint(t, logStore(t)) })
	t.Run("RawCopy", func(t *testing.T) { testRawCopy(t, h, logStore(t), logStore(t)) })
	t.Run("ForkLink", func(t *testing.T) { testForkLink(t, h, logStore(t)) })
	if h.Reopen != nil {
		t.Run("AppendLogRace", func(t *testing.T) {
			s := logStore(t)
			testAppendLogRace(t, s, asLogStore(t, h.Reopen(t, s)))
		})
	}
}

// asLogStore is s as a store.LogStore, which the caller knows it is.
func asLogStore(t *testing.T, s agent.SessionStore) store.LogStore {
	t.Helper()
	ls, ok := store.AsLogStore(s)
	if !ok {
		t.Fatalf("%T is not a store.LogStore", s)
	}
	return ls
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func checkpointOf(b []byte) store.Checkpoint {
	if len(b) == 0 {
		return store.Checkpoint{}
	}
	return store.Checkpoint{Length: int64(len(b)), SHA256: hexSHA(b)}
}

func readLog(t *testing.T, s store.LogStore, id string, from int64) ([]byte, store.Checkpoint) {
	t.Helper()
	r, end, err := s.ReadLog(t.Context(), id, from)
	if err != nil {
		t.Fatalf("ReadLog(%s, %d): %v", id, from, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("ReadLog(%s, %d): read: %v", id, from, err)
	}
	return b, end
}

func logsByID(t *testing.T, s store.LogStore) map[string]store.Log {
	t.Helper()
	logs, err := s.Logs(t.Context())
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	m := map[string]store.Log{}
	for _, l := range logs {
		if _, dup := m[l.Info.ID]; dup {
			t.Errorf("Logs lists %s twice", l.Info.ID)
		}
		m[l.Info.ID] = l
	}
	return m
}

func encodeBatch(t *testing.T, id string, header bool, texts ...string) []byte {
	t.Helper()
	var msgs []agent.PersistentMessage
	for _, s := range texts {
		msgs = append(msgs, pm(agent.UserText(s), identityA))
	}
	b, err := sessionlog.EncodeBatch(id, header, msgs, time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testLogsAndReadLog(t *testing.T, h Harness, s store.LogStore) {
	ctx := t.Context()
	if got := logsByID(t, s); len(got) != 0 {
		t.Fatalf("Logs of an empty store: %v", got)
	}
	appendOK(t, s, "logs-a", texts("a", 3))
	appendOK(t, s, "logs-a", texts("a2", 2))
	appendOK(t, s, "logs-b", texts("b", 1))
	h.settle(t, s)
	logs := logsByID(t, s)
	if len(logs) != 2 {
		t.Fatalf("Logs lists %d sessions, want 2", len(logs))
	}
	infos := map[string]agent.SessionInfo{}
	for _, info := range listOK(t, s) {
		infos[info.ID] = info
	}
	for id, l := range logs {
		raw, end := readLog(t, s, id, 0)
		if l.Checkpoint != checkpointOf(raw) || end != l.Checkpoint {
			t.Errorf("%s: Logs says %v, ReadLog's end %v, its bytes are %v", id, l.Checkpoint, end, checkpointOf(raw))
		}
		if l.Err != nil {
			t.Errorf("%s: Logs reports %v", id, l.Err)
		}
		if want := infos[id]; l.Info.MessageCount != want.MessageCount || l.Info.LastUserMessage != want.LastUserMessage || !l.Info.Modified.Equal(want.Modified) {
			t.Errorf("%s: Logs info %+v, List info %+v", id, l.Info, want)
		}
		log, err := sessionlog.Parse(id, raw)
		if err != nil || log == nil || log.Committed != len(raw) {
			t.Fatalf("%s: ReadLog's bytes do not parse as a whole log: %v", id, err)
		}
		conv := loadOK(t, s, id)
		if len(conv.Messages) != len(log.Messages) {
			t.Errorf("%s: ReadLog holds %d messages, Load %d", id, len(log.Messages), len(conv.Messages))
		}
		// From any offset, the rest of the same bytes.
		for _, from := range []int64{1, int64(len(raw)) / 2, int64(len(raw)) - 1, int64(len(raw))} {
			tail, end := readLog(t, s, id, from)
			if !bytes.Equal(tail, raw[from:]) || end != l.Checkpoint {
				t.Errorf("%s: ReadLog from %d: %d bytes, want %d", id, from, len(tail), len(raw)-int(from))
			}
		}
		if _, _, err := s.ReadLog(ctx, id, int64(len(raw))+1); err == nil {
			t.Errorf("%s: ReadLog past the end succeeded", id)
		}
		if err := store.Verify(ctx, s, id); err != nil {
			t.Errorf("%s: Verify: %v", id, err)
		}
	}
	_, _, err := s.ReadLog(ctx, "logs-missing", 0)
	wantErr(t, "ReadLog of a missing session", err, agent.ErrSessionNotFound)
	_, _, err = s.ReadLog(ctx, "../x", 0)
	wantErr(t, "ReadLog(../x)", err, agent.ErrInvalidSessionID)
}

func testAppendLog(t *testing.T, h Harness, s store.LogStore) {
	ctx := t.Context()
	id := "raw-" + agent.NewSessionID()
	b1 := encodeBatch(t, id, true, "one", "two")
	b2 := encodeBatch(t, id, false, "three")
	b3 := encodeBatch(t, id, false, "four", "five")
	cp1, err := s.AppendLog(ctx, id, store.Checkpoint{}, b1)
	if err != nil {
		t.Fatalf("AppendLog creating the session: %v", err)
	}
	if cp1 != checkpointOf(b1) {
		t.Errorf("AppendLog returned %v, want %v", cp1, checkpointOf(b1))
	}
	// Again: the log is not empty any more, so it is refused, saying what
	// it holds (and the caller learns it wrote nothing).
	var changed *store.ChangedError
	if _, err := s.AppendLog(ctx, id, store.Checkpoint{}, b1); !errors.As(err, &changed) || changed.Have != cp1 {
		t.Errorf("the same create again: %v; want a ChangedError saying the log holds %v", err, cp1)
	}
	// Two batches in one append.
	both := append(append([]byte{}, b2...), b3...)
	cp2, err := s.AppendLog(ctx, id, cp1, both)
	all := append(append([]byte{}, b1...), both...)
	if err != nil || cp2 != checkpointOf(all) {
		t.Fatalf("AppendLog at %v: %v, %v; want %v", cp1, cp2, err, checkpointOf(all))
	}
	if _, err := s.AppendLog(ctx, id, cp1, both); !errors.As(err, &changed) || changed.Have != cp2 {
		t.Errorf("the same append again: %v; want a ChangedError saying the log holds %v", err, cp2)
	}
	// Anywhere but the end is refused, saying what the log holds.
	b4 := encodeBatch(t, id, false, "six")
	for _, at := range []store.Checkpoint{{}, cp1, {Length: cp2.Length, SHA256: cp1.SHA256}, {Length: cp2.Length + 5, SHA256: cp2.SHA256}} {
		_, err := s.AppendLog(ctx, id, at, b4)
		if !errors.As(err, &changed) || !errors.Is(err, store.ErrChanged) {
			t.Errorf("AppendLog at %v of a log at %v: %v, want a *store.ChangedError", at, cp2, err)
			continue
		}
		if changed.Have != cp2 || changed.Want != at {
			t.Errorf("ChangedError says it holds %v expecting %v; want %v, %v", changed.Have, changed.Want, cp2, at)
		}
	}
	h.settle(t, s)
	raw, end := readLog(t, s, id, 0)
	if !bytes.Equal(raw, all) || end != cp2 {
		t.Errorf("the log holds %d bytes (%v), want %d", len(raw), end, len(all))
	}
	if l := logsByID(t, s)[id]; l.Checkpoint != cp2 || l.Info.MessageCount != 5 || l.Info.LastUserMessage != "five" {
		t.Errorf("Logs after raw appends: %+v", l)
	}
	sameTexts(t, "Load after raw appends", loadOK(t, s, id), []agent.PersistentMessage{
		pm(agent.UserText("one"), identityA), pm(agent.UserText("two"), identityA), pm(agent.UserText("three"), identityA),
		pm(agent.UserText("four"), identityA), pm(agent.UserText("five"), identityA)})
	// A raw append and a message append go on one after the other.
	appendOK(t, s, id, texts("after", 1))
	raw, _ = readLog(t, s, id, 0)
	if !bytes.HasPrefix(raw, all) || len(raw) == len(all) {
		t.Errorf("AppendMessages after AppendLog: %d bytes", len(raw))
	}
}

func testAppendLogRefuses(t *testing.T, s store.LogStore) {
	ctx := t.Context()
	id := "refuse-" + agent.NewSessionID()
	first := encodeBatch(t, id, true, "a", "b")
	second := encodeBatch(t, id, false, "c", "d")
	other := encodeBatch(t, "another-session", true, "x")
	bad := map[string][]byte{
		"empty":           nil,
		"no header":       second,
		"another header":  other,
		"torn line":       first[:len(first)-1],
		"cut batch":       first[:bytes.IndexByte(first, '\n')+1],
		"not the format":  []byte("{\"hello\":1}\n"),
		"not json":        []byte("hello\n"),
		"a second header": append(append([]byte{}, first...), first...),
	}
	for name, data := range bad {
		if _, err := s.AppendLog(ctx, id, store.Checkpoint{}, data); err == nil {
			t.Errorf("AppendLog(%s) of a new session succeeded", name)
		}
	}
	if _, _, err := s.ReadLog(ctx, id, 0); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("refused appends created the session: %v", err)
	}
	cp, err := s.AppendLog(ctx, id, store.Checkpoint{}, first)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"a header": first, "torn": second[:len(second)-2], "not json": []byte("{\n")} {
		if _, err := s.AppendLog(ctx, id, cp, data); err == nil {
			t.Errorf("AppendLog(%s) after the first batch succeeded", name)
		}
	}
	if raw, end := readLog(t, s, id, 0); !bytes.Equal(raw, first) || end != cp {
		t.Errorf("refused appends changed the log: %d bytes", len(raw))
	}
	if _, err := s.AppendLog(ctx, id, store.Checkpoint{Length: 7}, second); !errors.Is(err, store.ErrChanged) {
		t.Errorf("AppendLog expecting 7 bytes of a log of %d: %v", cp.Length, err)
	}
	if _, err := s.AppendLog(ctx, "raw-missing", cp, second); !errors.Is(err, store.ErrChanged) {
		t.Errorf("AppendLog expecting %v of a missing session: %v, want ErrChanged", cp, err)
	}
	if _, err := s.AppendLog(ctx, "../x", store.Checkpoint{}, first); !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Errorf("AppendLog(../x): %v", err)
	}
}

func testPrefixCheckpoint(t *testing.T, s store.LogStore) {
	ctx := t.Context()
	id := "prefix-" + agent.NewSessionID()
	var all []byte
	at := store.Checkpoint{}
	for i := range 4 {
		b := encodeBatch(t, id, i == 0, fmt.Sprintf("batch %d", i))
		var err error
		if at, err = s.AppendLog(ctx, id, at, b); err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	for _, n := range []int64{0, 1, int64(len(all)) / 3, int64(len(all)) - 1, int64(len(all))} {
		cp, err := store.PrefixCheckpoint(ctx, s, id, n)
		if err != nil {
			t.Fatalf("PrefixCheckpoint(%d): %v", n, err)
		}
		if cp.Length > n || cp != checkpointOf(all[:cp.Length]) {
			t.Errorf("PrefixCheckpoint(%d) = %v, which is not a prefix of at most %d bytes", n, cp, n)
		}
	}
	if cp, _ := store.PrefixCheckpoint(ctx, s, id, int64(len(all))); cp.Length != int64(len(all)) {
		t.Errorf("PrefixCheckpoint of the whole log = %v, want the whole log (every store knows its end)", cp)
	}
}

// testRawCopy copies a log from one store to another through the raw
// vocabulary alone, in two appends (as a push after a pull would), and
// checks that both read back the same.
func testRawCopy(t *testing.T, h Harness, src, dst store.LogStore) {
	ctx := t.Context()
	id := "copy-" + agent.NewSessionID()
	for _, m := range RoundTripMessages() {
		appendOK(t, src, id, []agent.PersistentMessage{m})
	}
	raw, end := readLog(t, src, id, 0)
	cut := bytes.IndexByte(raw, '\n') + 1 // after the header: the first batch is the header and one message
	cut += bytes.IndexByte(raw[cut:], '\n') + 1
	cp, err := dst.AppendLog(ctx, id, store.Checkpoint{}, raw[:cut])
	if err != nil {
		t.Fatal(err)
	}
	tail, _ := readLog(t, src, id, cp.Length)
	if cp, err = dst.AppendLog(ctx, id, cp, tail); err != nil || cp != end {
		t.Fatalf("copy the tail: %v, %v; want %v", cp, err, end)
	}
	h.settle(t, dst)
	if got, _ := readLog(t, dst, id, 0); !bytes.Equal(got, raw) {
		t.Fatalf("the copy holds other bytes")
	}
	want := loadOK(t, src, id)
	got := loadOK(t, dst, id)
	for i := range want.Messages {
		if d := diffMessage(want.Messages[i], got.Messages[i]); d != "" {
			t.Errorf("message %d of the copy: %s", i, d)
		}
	}
	if l := logsByID(t, dst)[id]; l.Checkpoint != end || l.Info.MessageCount != len(want.Messages) {
		t.Errorf("Logs of the copy: %+v, want %v and %d messages", l, end, len(want.Messages))
	}
}

// testAppendLogRace has two handles append different batches at the same
// checkpoint at once, many times: exactly one of each pair lands, the
// other is told the log changed, and the log is never torn.
func testAppendLogRace(t *testing.T, a, b store.LogStore) {
	ctx := t.Context()
	id := "race-" + agent.NewSessionID()
	at, err := a.AppendLog(ctx, id, store.Checkpoint{}, encodeBatch(t, id, true, "start"))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		var wg sync.WaitGroup
		results := make([]store.Checkpoint, 2)
		errs := make([]error, 2)
		for i, s := range []store.LogStore{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = s.AppendLog(ctx, id, at, encodeBatch(t, id, false, fmt.Sprintf("round %d from %d", round, i)))
			}()
		}
		wg.Wait()
		won := 0
		for i := range 2 {
			switch {
			case errs[i] == nil:
				won++
				at = results[i]
			case !errors.Is(errs[i], store.ErrChanged):
				t.Fatalf("round %d, handle %d: %v", round, i, errs[i])
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d appends at the same checkpoint landed, want 1", round, won)
		}
	}
	raw, end := readLog(t, a, id, 0)
	if end != at || checkpointOf(raw) != at {
		t.Fatalf("after the races the log is at %v (%v), the winners said %v", end, checkpointOf(raw), at)
	}
	if conv := loadOK(t, b, id); len(conv.Messages) != 7 {
		t.Errorf("%d messages after 6 rounds, want 7", len(conv.Messages))
	}
}

// testForkLink: a fork (sessionlog.Fork of one session's log, appended
// raw as a new session) lists with its parent and fork point, and with
// its own summary of the messages it holds; the parent is untouched.
func testForkLink(t *testing.T, h Harness, s store.LogStore) {
	ctx := t.Context()
	msgs := RoundTripMessages()
	appendOK(t, s, "fork-parent", msgs)
	parent, end := readLog(t, s, "fork-parent", 0)
	data, n, err := sessionlog.Fork(bytes.NewReader(parent), "fork-parent", "fork-child", 5, time.Now())
	if err != nil || n != 5 {
		t.Fatalf("Fork: %d messages, %v", n, err)
	}
	if _, err := s.AppendLog(ctx, "fork-child", store.Checkpoint{}, data); err != nil {
		t.Fatalf("AppendLog of the fork: %v", err)
	}
	h.settle(t, s)
	var want agent.SessionInfo
	for _, m := range msgs[:5] {
		want.Update(m)
	}
	for from, info := range map[string]agent.SessionInfo{"List": infoOf(t, s, "fork-child"), "Logs": logsByID(t, s)["fork-child"].Info} {
		if info.Parent != "fork-parent" || info.ForkedAt != 5 || info.MessageCount != 5 || info.Usage != want.Usage || info.LastUserMessage != want.LastUserMessage {
			t.Errorf("%s: fork info %+v; want parent fork-parent at 5, 5 messages, usage %+v", from, info, want.Usage)
		}
	}
	if info := infoOf(t, s, "fork-parent"); info.Parent != "" || info.MessageCount != len(msgs) {
		t.Errorf("parent info after the fork: %+v", info)
	}
	if after, cp := readLog(t, s, "fork-parent", 0); !bytes.Equal(after, parent) || cp != end {
		t.Error("the fork changed its parent's log")
	}
	sameTexts(t, "Load of the fork", loadOK(t, s, "fork-child"), msgs[:5])
}
