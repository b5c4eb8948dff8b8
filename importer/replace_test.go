package importer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// listing is what a store lists, as an Import's Listing.
type listing struct {
	at, deleted map[string]store.Checkpoint
}

func listStore(t *testing.T, st store.LogStore) listing {
	t.Helper()
	ctx := context.Background()
	logs, err := st.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tombs, err := store.Tombstones(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	l := listing{at: map[string]store.Checkpoint{}, deleted: map[string]store.Checkpoint{}}
	for _, log := range logs {
		l.at[log.Info.ID] = log.Checkpoint
	}
	for _, tomb := range tombs {
		l.deleted[tomb.ID] = tomb.At
	}
	return l
}

func (l listing) Checkpoint(id string) store.Checkpoint { return l.at[id] }
func (l listing) Deleted(id string) (store.Checkpoint, bool) {
	at, ok := l.deleted[id]
	return at, ok
}

// rawToolID is a call id of the OpenAI Responses API, which pi records
// and an earlier panto stored as it was (7f1fba9 replaces it).
const rawToolID = "call_Xy7|fc_0123456789abcdefghijABCDEFGHIJ+/=0123456789"

// olderImport returns pi.jsonl with rawToolID for its first call, its
// first lines (those that hold that call and its result), and what an
// earlier panto stored of them: this conversion, with the raw id.
func olderImport(t *testing.T) (data []byte, firstLines int, stored []byte) {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join("testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(orig, []byte(`"c1"`), []byte(`"`+rawToolID+`"`))
	lines := func(data []byte, n int) int {
		end := 0
		for range n {
			end = nextLineEnd(data, end)
		}
		return end
	}
	// Through e6: the call, its result and the answer after them.
	c, err := Convert(Pi, "pi.jsonl", orig[:lines(orig, 7)])
	if err != nil {
		t.Fatal(err)
	}
	return data, lines(data, 7), bytes.ReplaceAll(c.Log, []byte(`"c1"`), []byte(`"`+rawToolID+`"`))
}

func importWith(t *testing.T, st store.LogStore, data []byte, opts Options) (*Conversion, Outcome) {
	t.Helper()
	c, err := Convert(Pi, "pi.jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Import(context.Background(), st, c, listStore(t, st), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, out
}

// TestReplaceDiverged: a session an earlier panto converted otherwise
// (a tool call's id a provider refuses) diverges from its new
// conversion; Replace writes that as a new session naming the one it
// replaces, deletes the old (its tombstone at the stored checkpoint),
// and every later import, without Replace, brings the replacement up to
// date.
func TestReplaceDiverged(t *testing.T) {
	ctx := context.Background()
	st := openDir(t)
	data, first, old := olderImport(t)
	c, err := Convert(Pi, "pi.jsonl", data[:first])
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.AppendLog(ctx, c.ID, store.Checkpoint{}, old)
	if err != nil {
		t.Fatal(err)
	}
	if _, out := importWith(t, st, data[:first], Options{}); out.Action != ActionDiverged || out.ID != c.ID {
		t.Fatalf("import of a session an earlier panto converted otherwise: %+v, want diverged", out)
	}
	replID := ReplacementID(c.ID, held)
	if _, out := importWith(t, st, data[:first], Options{Replace: true, Dry: true}); out.Action != ActionReplaced || out.ID != replID || out.Replaced != c.ID || out.Kept || out.Deleted != nil {
		t.Fatalf("dry run: %+v, want %s replaced by %s", out, c.ID, replID)
	}
	if l := listStore(t, st); len(l.at) != 1 || len(l.deleted) != 0 {
		t.Fatalf("the dry run wrote: %+v", l)
	}
	_, out := importWith(t, st, data[:first], Options{Replace: true})
	if out.Action != ActionReplaced || out.ID != replID || out.Replaced != c.ID || out.Kept || out.Deleted == nil || out.Deleted.At != held || out.Appended != c.Messages {
		t.Fatalf("replace: %+v, want %s replaced by %s, deleted at %v", out, c.ID, replID, held)
	}
	got := storedBytes(t, st, replID)
	want, err := rewriteHeader(c.Log, func(h *sessionlog.Header) { h.ID, h.Replaces = replID, c.ID })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || bytes.Contains(got, []byte("fc_")) {
		t.Fatalf("the replacement holds\n%s\nwant the new conversion under a header naming %s\n%s", got, c.ID, want)
	}
	var deleted *agent.DeletedError
	if _, err := st.Resolve(ctx, c.ID); !errors.As(err, &deleted) || deleted.SHA256 != held.SHA256 {
		t.Fatalf("the replaced session: %v, want deleted at %v", err, held)
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != replID {
		t.Fatalf("listed: %+v, %v: want the replacement alone (panto -c continues it)", list, err)
	}
	if _, out := importWith(t, st, data[:first], Options{}); out.Action != ActionUnchanged || out.ID != replID {
		t.Errorf("import again: %+v, want the replacement unchanged", out)
	}
	whole, out := importWith(t, st, data, Options{})
	if out.Action != ActionAppended || out.ID != replID || out.Appended != whole.Messages-c.Messages {
		t.Fatalf("the source grown: %+v, want its new messages appended to %s", out, replID)
	}
	if got := storedBytes(t, st, replID); !bytes.HasSuffix(got, whole.Log[len(c.Log):]) || len(got) != len(want)+len(whole.Log)-len(c.Log) {
		t.Errorf("the replacement after the source grew: %d bytes, want the whole conversion", len(got))
	}
	if _, out := importWith(t, st, data, Options{Replace: true}); out.Action != ActionUnchanged || out.ID != replID {
		t.Errorf("import again with Replace: %+v, want unchanged", out)
	}

	// A replacement its user deleted stays deleted.
	replAt, err := store.Head(ctx, st, replID)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, st, store.Tombstone{ID: replID, Deleted: time.Now().UTC(), At: replAt}); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {Replace: true}} {
		if _, out := importWith(t, st, data, opts); out.Action != ActionDeleted || out.ID != replID {
			t.Errorf("import (%+v) after the replacement was deleted: %+v, want deleted", opts, out)
		}
	}
}

// TestDeletedStaysDeleted: a session imported and deleted (panto rm),
// never replaced, is not brought back, by a plain import or one with
// Replace, as its tombstone is listed or, past its retention, refuses
// the append.
func TestDeletedStaysDeleted(t *testing.T) {
	ctx := context.Background()
	st := openDir(t)
	data, _, _ := olderImport(t)
	c, out := importWith(t, st, data, Options{})
	if out.Action != ActionNew {
		t.Fatalf("first import: %+v", out)
	}
	at, err := store.Head(ctx, st, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, st, store.Tombstone{ID: c.ID, Deleted: time.Now().UTC(), At: at}); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {Replace: true}, {Replace: true, Dry: true}} {
		if _, out := importWith(t, st, data, opts); out.Action != ActionDeleted || out.ID != c.ID {
			t.Errorf("import (%+v) of a deleted session: %+v, want deleted", opts, out)
		}
	}
	// The tombstone no longer listed: the append's refusal says the same.
	unlisted := listing{at: map[string]store.Checkpoint{}, deleted: map[string]store.Checkpoint{}}
	if out, err := Import(ctx, st, c, unlisted, Options{Replace: true}); err != nil || out.Action != ActionDeleted {
		t.Errorf("import of a deleted session whose tombstone is not listed: %+v, %v, want deleted", out, err)
	}
	if list, err := st.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("listed: %+v, %v: want nothing", list, err)
	}
}

// TestReplaceKeepsContinued: a diverged session continued in panto (a
// turn after its imported messages) is kept beside its replacement,
// which later imports bring up to date.
func TestReplaceKeepsContinued(t *testing.T) {
	ctx := context.Background()
	st := openDir(t)
	data, first, old := olderImport(t)
	c, err := Convert(Pi, "pi.jsonl", data[:first])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendLog(ctx, c.ID, store.Checkpoint{}, old); err != nil {
		t.Fatal(err)
	}
	continueInPanto(t, st, c.ID)
	held, err := store.Head(ctx, st, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	replID := ReplacementID(c.ID, held)
	_, out := importWith(t, st, data[:first], Options{Replace: true})
	if out.Action != ActionReplaced || out.ID != replID || !out.Kept || out.Deleted != nil {
		t.Fatalf("replace of a session continued in panto: %+v, want %s kept beside %s", out, c.ID, replID)
	}
	if got := storedBytes(t, st, c.ID); !bytes.HasPrefix(got, old) || !bytes.Contains(got, []byte("and now?")) {
		t.Fatalf("the session continued in panto was changed:\n%s", got)
	}
	if _, out := importWith(t, st, data, Options{}); out.Action != ActionAppended || out.ID != replID {
		t.Errorf("the source grown: %+v, want appended to %s", out, replID)
	}
}

// TestContinuedInPanto: what of a stored log says it was continued in
// panto, rather than converted otherwise.
func TestContinuedInPanto(t *testing.T) {
	data, _, old := olderImport(t)
	c, err := Convert(Pi, "pi.jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	turn := func(m agent.Message, at time.Time) []byte {
		b, err := sessionlog.EncodeBatch(c.ID, false, []agent.PersistentMessage{{Message: m}}, at)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now()
	cut := nextLineEnd(old, nextLineEnd(old, 0))
	// A subagent's prompt an earlier conversion read as the session's:
	// its time is the source's, which the new conversion has no message of.
	sidechain := turn(agent.UserText("a subagent's prompt"), time.Date(2026, 3, 1, 10, 0, 1, 500e6, time.UTC))
	for _, tc := range []struct {
		name string
		have []byte
		want bool
	}{
		{"an earlier conversion", old, false},
		{"an earlier conversion with a message the new one leaves out", bytes.Join([][]byte{old[:cut], sidechain, old[cut:]}, nil), false},
		{"a turn after the import", append(append([]byte(nil), old...), turn(agent.UserText("and now?"), now)...), true},
		{"a title given in panto", bytes.Join([][]byte{old[:cut], turn(agent.TitleMessage("Named"), now), old[cut:]}, nil), true},
		{"ends in a message the new conversion leaves out", append(append([]byte(nil), old...), sidechain...), true},
	} {
		if got := continuedInPanto(tc.have, c.Log); got != tc.want {
			t.Errorf("%s: continued in panto %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEarlierCodexConversion: a Codex session an earlier panto imported
// (its prompts of images attached from disk dropped, a compaction by
// OpenAI a placeholder, before round 32 its 0.171 prompts too) is not a
// divergence: it grows in that panto's form, and says so, until an
// import with Replace replaces it by the new conversion.
func TestEarlierCodexConversion(t *testing.T) {
	ctx := context.Background()
	ev := func(sec int, payload string) string {
		return fmt.Sprintf(`{"timestamp":"2026-10-01T00:00:%02dZ","type":"event_msg","payload":%s}`, sec, payload) + "\n"
	}
	answer := func(sec int, text string) string {
		return fmt.Sprintf(`{"timestamp":"2026-10-01T00:00:%02dZ","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":%q}]}}`, sec, text) + "\n" +
			ev(sec, `{"type":"task_complete"}`)
	}
	first := `{"timestamp":"2026-10-01T00:00:00Z","type":"session_meta","payload":{"id":"earlier","cwd":"/w"}}` + "\n" +
		ev(1, `{"type":"task_started"}`) + ev(1, `{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"fix the build"}]}}`) + answer(2, "fixed") +
		`{"timestamp":"2026-10-01T00:00:03Z","type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the build"}]},{"type":"compaction","encrypted_content":"gAAAA"}]}}` + "\n" +
		ev(4, `{"type":"task_started"}`) + ev(4, `{"type":"user_message","message":"","local_images":["/tmp/shot.png"]}`) + answer(5, "a red build")
	whole := first + ev(6, `{"type":"task_started"}`) + ev(6, `{"type":"user_message","message":"and now?","local_images":["/tmp/b.png"]}`) + answer(7, "green")

	for _, tc := range []struct {
		name  string
		rules codexRules
	}{{"round 32", codexEarlier[0]}, {"before round 32", codexEarlier[1]}} {
		t.Run(tc.name, func(t *testing.T) {
			st := openDir(t)
			convertAs := func(rules codexRules, data string) *Conversion {
				t.Helper()
				c, err := convert(&codex{b: newBuilder(Codex), rules: rules}, Codex, "r.jsonl", []byte(data))
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			old := convertAs(tc.rules, first)
			now := convertAs(codexRules{}, first)
			if bytes.Equal(old.Log, now.Log) {
				t.Fatal("the earlier conversion is the current one: the test proves nothing")
			}
			held, err := st.AppendLog(ctx, old.ID, store.Checkpoint{}, old.Log)
			if err != nil {
				t.Fatal(err)
			}
			imp := func(data string, opts Options) Outcome {
				t.Helper()
				c, err := Convert(Codex, "r.jsonl", []byte(data))
				if err != nil {
					t.Fatal(err)
				}
				out, err := Import(ctx, st, c, listStore(t, st), opts)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			if out := imp(first, Options{}); out.Action != ActionUnchanged || !out.Earlier {
				t.Fatalf("import of the same log: %+v, want unchanged, an earlier conversion", out)
			}
			out := imp(whole, Options{})
			if out.Action != ActionAppended || !out.Earlier || out.Appended != 2 {
				t.Fatalf("import of the grown log: %+v, want 2 messages appended to the earlier conversion", out)
			}
			if got, want := storedBytes(t, st, old.ID), convertAs(tc.rules, whole).Log; !bytes.Equal(got, want) {
				t.Fatalf("stored after the append:\n%s\nwant the earlier panto's conversion of the whole log:\n%s", got, want)
			}
			grown, err := store.Head(ctx, st, old.ID)
			if err != nil {
				t.Fatal(err)
			}
			out = imp(whole, Options{Replace: true})
			if out.Action != ActionReplaced || out.Replaced != old.ID || out.ID != ReplacementID(old.ID, grown) {
				t.Fatalf("import with Replace: %+v, want %s replaced (held at %v, first %v)", out, old.ID, grown, held)
			}
			got := storedBytes(t, st, out.ID)
			if !bytes.Contains(got, []byte("[image]")) || !bytes.Contains(got, []byte("what it kept in the clear")) {
				t.Errorf("the replacement is not the new conversion:\n%s", got)
			}
			if out := imp(whole, Options{}); out.Action != ActionUnchanged || out.Earlier || out.ID != ReplacementID(old.ID, grown) {
				t.Errorf("import after the replacement: %+v, want the replacement unchanged", out)
			}
		})
	}
}
