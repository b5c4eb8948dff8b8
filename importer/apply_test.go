package importer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

func openDir(t *testing.T) *fsjsonl.Store {
	t.Helper()
	st, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// importInto converts data and applies it to st at what st lists.
func importInto(t *testing.T, st store.LogStore, a Agent, name string, data []byte, dry bool) (*Conversion, Outcome) {
	t.Helper()
	ctx := context.Background()
	c, err := Convert(a, name, data)
	if err != nil {
		t.Fatal(err)
	}
	var at store.Checkpoint
	if c.ID != "" {
		at, err = store.Head(ctx, st, c.ID)
		if err != nil && len(c.Log) > 0 && at.Length != 0 {
			t.Fatal(err)
		}
	}
	out, err := Apply(ctx, st, c, at, dry)
	if err != nil {
		t.Fatal(err)
	}
	return c, out
}

func storedBytes(t *testing.T, st store.LogStore, id string) []byte {
	t.Helper()
	r, _, err := st.ReadLog(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// continueInPanto appends a user turn to the stored session, as a panto
// run that continued it would.
func continueInPanto(t *testing.T, st store.LogStore, id string) {
	t.Helper()
	ctx := context.Background()
	head, err := store.Head(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	more, err := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{{Message: agent.UserText("and now?")}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendLog(ctx, id, head, more); err != nil {
		t.Fatal(err)
	}
}

// TestIncrementalImport imports each log cut at every line, growing, into
// one store: the store ends with the bytes of a single import of the
// whole log, and importing it again changes nothing.
func TestIncrementalImport(t *testing.T) {
	for _, tc := range []struct {
		file  string
		agent Agent
	}{{"claude-code.jsonl", ClaudeCode}, {"codex.jsonl", Codex}, {"pi.jsonl", Pi}} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			once := openDir(t)
			whole, out := importInto(t, once, tc.agent, path, data, false)
			if out.Action != ActionNew || out.Appended != whole.Messages {
				t.Fatalf("first import: %+v", out)
			}
			grown := openDir(t)
			actions := map[Action]int{}
			for cut := 0; cut < len(data); cut = nextLineEnd(data, cut) {
				_, out := importInto(t, grown, tc.agent, path, data[:cut], false)
				actions[out.Action]++
			}
			_, out = importInto(t, grown, tc.agent, path, data, false)
			actions[out.Action]++
			if actions[ActionNew] != 1 || actions[ActionAppended] == 0 || actions[ActionDiverged] != 0 {
				t.Errorf("actions over the cuts: %v", actions)
			}
			if got, want := storedBytes(t, grown, whole.ID), storedBytes(t, once, whole.ID); !bytes.Equal(got, want) {
				t.Fatalf("grown line by line the store holds %d bytes, imported once %d", len(got), len(want))
			}
			if _, out := importInto(t, grown, tc.agent, path, data, false); out.Action != ActionUnchanged {
				t.Errorf("import again: %+v, want unchanged", out)
			}
		})
	}
}

func TestApplyActions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join("testdata", "pi.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	half := data[:nextLineEnd(data, len(data)/2)]

	t.Run("dry run writes nothing", func(t *testing.T) {
		st := openDir(t)
		c, out := importInto(t, st, Pi, path, data, true)
		if out.Action != ActionNew || out.Appended != c.Messages {
			t.Fatalf("dry: %+v", out)
		}
		if _, err := store.Head(ctx, st, c.ID); err == nil {
			t.Fatal("a dry run wrote the session")
		}
		importInto(t, st, Pi, path, half, false)
		before := storedBytes(t, st, c.ID)
		if _, out := importInto(t, st, Pi, path, data, true); out.Action != ActionAppended || out.Appended == 0 {
			t.Fatalf("dry append: %+v", out)
		}
		if !bytes.Equal(storedBytes(t, st, c.ID), before) {
			t.Fatal("a dry run appended")
		}
	})

	t.Run("a source changed below the import diverges and is left alone", func(t *testing.T) {
		st := openDir(t)
		c, _ := importInto(t, st, Pi, path, data, false)
		before := storedBytes(t, st, c.ID)
		changed := bytes.Replace(data, []byte("List the files."), []byte("List the files!"), 1)
		_, out := importInto(t, st, Pi, path, changed, false)
		if out.Action != ActionDiverged || out.Err == nil {
			t.Fatalf("changed source: %+v, want diverged", out)
		}
		if !bytes.Equal(storedBytes(t, st, c.ID), before) {
			t.Fatal("a diverged import wrote")
		}
	})

	t.Run("a session continued in panto stays", func(t *testing.T) {
		st := openDir(t)
		c, _ := importInto(t, st, Pi, path, data, false)
		continueInPanto(t, st, c.ID)
		if _, out := importInto(t, st, Pi, path, data, false); out.Action != ActionUnchanged {
			t.Fatalf("import after panto continued it: %+v, want unchanged", out)
		}
	})

	t.Run("a listing behind the store", func(t *testing.T) {
		st := openDir(t)
		importInto(t, st, Pi, path, half, false)
		c, err := Convert(Pi, path, data)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Apply(ctx, st, c, store.Checkpoint{}, false) // as if the listing did not show it
		if err != nil || out.Action != ActionAppended {
			t.Fatalf("%+v %v, want appended", out, err)
		}
		if got := storedBytes(t, st, c.ID); !bytes.Equal(got, c.Log) {
			t.Fatal("the store does not hold the conversion")
		}
	})

	t.Run("nothing complete yet", func(t *testing.T) {
		st := openDir(t)
		if _, out := importInto(t, st, Pi, path, data[:nextLineEnd(data, 0)], false); out.Action != ActionWaiting {
			t.Fatalf("a header alone: %+v, want waiting", out)
		}
	})
}

// TestImportedBeforeRemote: a Codex session imported by a panto that did
// not take the remote from the log (its header's project the directory
// alone) grows from what it holds, since a header cannot change; a new
// import records the remote.
func TestImportedBeforeRemote(t *testing.T) {
	path := filepath.Join("testdata", "codex.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const url = `,"repository_url":"https://github.com/me/app.git"`
	if !bytes.Contains(data, []byte(url)) {
		t.Fatal("the fixture records no remote")
	}
	// What the older panto wrote is what this one writes of a log
	// without the remote: the header is the only line the remote changes.
	before := bytes.Replace(data, []byte(url), nil, 1)
	half := nextLineEnd(data, len(data)/2)
	halfBefore := half - len(url)

	projectOf := func(log []byte) agent.Project {
		t.Helper()
		h, _ := entries(t, log)
		return h.Project
	}
	whole, err := Convert(Codex, path, data)
	if err != nil {
		t.Fatal(err)
	}
	if p := projectOf(whole.Log); p.Remote != "github.com/me/app" || p.Dir != "/home/me/app" {
		t.Fatalf("the conversion's project is %+v", p)
	}
	if len(whole.others) != 1 {
		t.Fatalf("%d other forms, want the one without the remote", len(whole.others))
	}
	withoutRemote := whole.others[0]
	if p := projectOf(withoutRemote); p != (agent.Project{Dir: "/home/me/app"}) {
		t.Fatalf("the older form's project is %+v", p)
	}

	t.Run("grows from the older header", func(t *testing.T) {
		st := openDir(t)
		old, _ := importInto(t, st, Codex, path, before[:halfBefore], false)
		if projectOf(storedBytes(t, st, old.ID)).Remote != "" {
			t.Fatal("the older import has a remote")
		}
		if _, out := importInto(t, st, Codex, path, data, true); out.Action != ActionAppended || out.Appended == 0 {
			t.Fatalf("dry import over the older one: %+v, want appended", out)
		}
		c, out := importInto(t, st, Codex, path, data, false)
		if out.Action != ActionAppended || out.Err != nil {
			t.Fatalf("import over the older one: %+v, want appended", out)
		}
		if got := storedBytes(t, st, c.ID); !bytes.Equal(got, withoutRemote) {
			t.Fatalf("the store holds %d bytes, not the conversion with the older header (%d)", len(got), len(withoutRemote))
		}
		if _, out := importInto(t, st, Codex, path, data, false); out.Action != ActionUnchanged {
			t.Fatalf("import again: %+v, want unchanged", out)
		}
		continueInPanto(t, st, c.ID)
		if _, out := importInto(t, st, Codex, path, data, false); out.Action != ActionUnchanged {
			t.Fatalf("import after panto continued it: %+v, want unchanged", out)
		}
	})

	t.Run("a new import records the remote", func(t *testing.T) {
		st := openDir(t)
		importInto(t, st, Codex, path, data[:half], false)
		c, out := importInto(t, st, Codex, path, data, false)
		if out.Action != ActionAppended {
			t.Fatalf("%+v, want appended", out)
		}
		if got := storedBytes(t, st, c.ID); !bytes.Equal(got, c.Log) {
			t.Fatal("the store does not hold the conversion")
		}
	})

	t.Run("a token in the URL is not kept", func(t *testing.T) {
		secret := bytes.Replace(data, []byte("https://github.com/me/app.git"), []byte("https://x-access-token:ghs_SECRET@github.com/me/app.git"), 1)
		c, err := Convert(Codex, path, secret)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.Log, whole.Log) || bytes.Contains(c.Log, []byte("SECRET")) {
			t.Fatal("a token in the remote's URL changed the conversion")
		}
	})

	t.Run("without a remote there is one form", func(t *testing.T) {
		c, err := Convert(Codex, path, before)
		if err != nil {
			t.Fatal(err)
		}
		if c.others != nil || !bytes.Equal(c.Log, withoutRemote) {
			t.Fatal("a log without a remote converts to other bytes than the older form")
		}
	})
}

// readCounter counts the reads of a store's logs.
type readCounter struct {
	store.LogStore
	reads int
}

func (r *readCounter) ReadLog(ctx context.Context, id string, from int64) (io.ReadCloser, store.Checkpoint, error) {
	r.reads++
	return r.LogStore.ReadLog(ctx, id, from)
}

// TestImportUnderAnotherProject: a session's header records the project
// its first import found (WithProject: the importing machine's disk), and
// a later import that finds another (the work tree gone, another machine)
// appends under the stored header, with one read of it; an import that
// finds the same one reads nothing.
func TestImportUnderAnotherProject(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join("testdata", "claude-code.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	half := data[:nextLineEnd(data, len(data)/2)]
	found := agent.Project{Remote: "host.test/me/app", Root: "/home/me/app", Dir: "/home/me/app"}
	convert := func(data []byte, p *agent.Project) *Conversion {
		t.Helper()
		c, err := Convert(ClaudeCode, path, data)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			if c, err = c.WithProject(*p); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	apply := func(st *readCounter, c *Conversion) Outcome {
		t.Helper()
		at, err := store.Head(ctx, st, c.ID)
		if err != nil && !errors.Is(err, agent.ErrSessionNotFound) {
			t.Fatal(err)
		}
		st.reads = 0
		out, err := Apply(ctx, st, c, at, false)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	st := &readCounter{LogStore: openDir(t)}
	first := convert(half, &found)
	if h, _ := entries(t, first.Log); h.Project != found || first.Project != found {
		t.Fatalf("WithProject: the header records %+v", h.Project)
	}
	if out := apply(st, first); out.Action != ActionNew {
		t.Fatalf("first import: %+v", out)
	}

	logOnly := convert(data, nil) // the work tree is gone: the log's project
	if out := apply(st, logOnly); out.Action != ActionAppended || st.reads != 1 {
		t.Fatalf("import that found another project: %+v after %d reads, want appended after one", out, st.reads)
	}
	whole := convert(data, &found)
	if got := storedBytes(t, st, whole.ID); !bytes.Equal(got, whole.Log) {
		t.Fatal("the store does not hold the whole log under the first import's header")
	}
	if out := apply(st, whole); out.Action != ActionUnchanged || st.reads != 0 {
		t.Fatalf("import that found the same project: %+v after %d reads, want unchanged after none", out, st.reads)
	}
	if out := apply(st, logOnly); out.Action != ActionUnchanged {
		t.Fatalf("import again that found another project: %+v, want unchanged", out)
	}
	changed := convert(bytes.Replace(data, []byte("Why does the parser fail?"), []byte("Why does the parser work?"), 1), nil)
	if out := apply(st, changed); out.Action != ActionDiverged {
		t.Fatalf("a source changed below the import, under another project: %+v, want diverged", out)
	}

	continueInPanto(t, st, whole.ID)
	if out := apply(st, logOnly); out.Action != ActionUnchanged {
		t.Fatalf("import after panto continued it, under another project: %+v, want unchanged", out)
	}
}

// TestImportPastTitles: a session named in panto after its import (panto
// title) while the agent went on writing its log takes the log's new
// messages after its titles, as often as that happens; a turn continued
// in panto still diverges.
func TestImportPastTitles(t *testing.T) {
	path := filepath.Join("testdata", "claude-code.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := openDir(t)
	title := func(id, name string) []byte {
		t.Helper()
		sess, err := st.Resolve(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before := storedBytes(t, st, id)
		if err := sess.Append(ctx, []agent.PersistentMessage{{Message: agent.TitleMessage(name)}}); err != nil {
			t.Fatal(err)
		}
		return storedBytes(t, st, id)[len(before):]
	}
	cut1 := nextLineEnd(data, nextLineEnd(data, nextLineEnd(data, 0)))
	cut1 = nextLineEnd(data, nextLineEnd(data, cut1))
	cut2 := nextLineEnd(data, nextLineEnd(data, nextLineEnd(data, cut1)))
	cut2 = nextLineEnd(data, nextLineEnd(data, cut2))
	first, out := importInto(t, st, ClaudeCode, path, data[:cut1], false)
	if out.Action != ActionNew {
		t.Fatalf("first import: %+v", out)
	}
	t1 := title(first.ID, "Named in panto")
	second, out := importInto(t, st, ClaudeCode, path, data[:cut2], false)
	if out.Action != ActionAppended || out.Appended != second.Messages-first.Messages {
		t.Fatalf("the source grown past a title: %+v, want %d messages appended", out, second.Messages-first.Messages)
	}
	t2 := title(first.ID, "Renamed")
	whole, out := importInto(t, st, ClaudeCode, path, data, false)
	if out.Action != ActionAppended || out.Appended != whole.Messages-second.Messages {
		t.Fatalf("the source grown past two titles: %+v", out)
	}
	want := bytes.Join([][]byte{first.Log, t1, second.Log[len(first.Log):], t2, whole.Log[len(second.Log):]}, nil)
	if got := storedBytes(t, st, whole.ID); !bytes.Equal(got, want) {
		t.Fatalf("the store holds %d bytes, want the conversion with the titles where they were written (%d)", len(got), len(want))
	}
	if _, out := importInto(t, st, ClaudeCode, path, data, false); out.Action != ActionUnchanged {
		t.Errorf("import again: %+v, want unchanged", out)
	}
	continueInPanto(t, st, whole.ID)
	if _, out := importInto(t, st, ClaudeCode, path, data, false); out.Action != ActionUnchanged {
		t.Errorf("continued in panto, the source unchanged: %+v", out)
	}
	prompt := data[bytes.Index(data, []byte(`{"parentUuid":"c1"`)):]
	prompt = bytes.Replace(prompt[:bytes.IndexByte(prompt, '\n')+1], []byte(`"uuid":"u3"`), []byte(`"uuid":"u4"`), 1)
	if _, out := importInto(t, st, ClaudeCode, path, append(append([]byte(nil), data...), prompt...), false); out.Action != ActionDiverged {
		t.Errorf("continued in panto, the source grown: %+v, want diverged", out)
	}
}
