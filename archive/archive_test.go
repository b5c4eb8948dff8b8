package archive_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/archive"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
	"github.com/panto-dev/panto/store/storetest"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

// stores are the stores every test runs on: a directory and a bucket.
var stores = []struct {
	name string
	open func(t *testing.T) store.LogStore
}{
	{"fs", func(t *testing.T) store.LogStore {
		s, err := fsjsonl.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"s3", func(t *testing.T) store.LogStore {
		srv := miniotest.Shared(t)
		srv.SetEnv(t)
		s, err := objstore.Open(t.Context(), "s3://"+srv.NewBucket(t)+"/archive")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

func eachStore(t *testing.T, fn func(t *testing.T, s store.LogStore)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { fn(t, st.open(t)) })
	}
}

var (
	modelA = agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://a.test", Model: "model-a"}
	modelB = agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "https://b.test/v1", Model: "model-b"}
)

func appendOK(t *testing.T, s store.LogStore, id string, msgs ...agent.PersistentMessage) {
	t.Helper()
	if err := s.AppendMessages(t.Context(), id, msgs); err != nil {
		t.Fatal(err)
	}
}

func flush(t *testing.T, s store.LogStore) {
	t.Helper()
	if err := store.Flush(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}

func search(t *testing.T, s store.LogStore, q archive.Query) ([]archive.Match, archive.Stats) {
	t.Helper()
	var got []archive.Match
	stats, err := archive.Search(t.Context(), s, q, archive.Options{Parallel: 3}, func(m archive.Match) error {
		got = append(got, m)
		return nil
	})
	if err != nil {
		t.Fatalf("search %q: %v", q.Pattern, err)
	}
	return got, stats
}

func where(ms []archive.Match) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s#%d:%s", m.Session.ID, m.Message, m.Block))
	}
	return strings.Join(parts, " ")
}

func TestSearch(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.LogStore) {
		// "every" holds every block kind: its tool result (message 5)
		// says "exit status 1", its thinking (message 4) "look at the
		// file".
		appendOK(t, s, "every", storetest.RoundTripMessages()...)
		time.Sleep(10 * time.Millisecond)
		thinking := agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{
			{Type: agent.BlockThinking, Text: "the secret plan is in the thinking"},
			agent.TextBlock("Nothing to see; the PLAN is public."),
		}}
		appendOK(t, s, "newer",
			agent.PersistentMessage{Message: agent.UserText("what is the plan? (also: exit status)"), Identity: modelB},
			agent.PersistentMessage{Message: thinking, Identity: modelB},
			agent.PersistentMessage{Message: agent.TitleMessage("the plan title")},
		)
		flush(t, s)

		got, stats := search(t, s, archive.Query{Pattern: "EXIT STATUS"})
		if w := where(got); w != "newer#1:text every#5:tool_result" {
			t.Errorf("exit status: %s", w)
		}
		if stats.Sessions != 2 || stats.Bytes == 0 || len(stats.Skipped) != 0 {
			t.Errorf("stats %+v", stats)
		}
		hit := got[1]
		if hit.Text != "exit status" || hit.Before != "" || !strings.HasPrefix(hit.After, ` 1: "quotes" <tags>`) || hit.Count != 1 || hit.Role != agent.RoleUser || hit.TS.IsZero() {
			t.Errorf("tool result hit %+v", hit)
		}

		// Thinking is searched only when asked.
		if got, _ := search(t, s, archive.Query{Pattern: "secret plan"}); len(got) != 0 {
			t.Errorf("secret plan without --thinking: %s", where(got))
		}
		got, _ = search(t, s, archive.Query{Pattern: "secret plan", Thinking: true})
		if where(got) != "newer#2:thinking" {
			t.Errorf("secret plan with thinking: %s", where(got))
		}
		got, _ = search(t, s, archive.Query{Pattern: "plan", Thinking: true})
		if where(got) != "newer#0:title newer#1:text newer#2:thinking" || got[2].Count != 2 {
			t.Errorf("plan with thinking: %s (%+v)", where(got), got)
		}
		// The title, as the listing has it, before the messages.
		got, _ = search(t, s, archive.Query{Pattern: "PLAN TITLE"})
		if where(got) != "newer#0:title" || got[0].Text != "plan title" || got[0].Before != "the " || got[0].Session.ID != "newer" {
			t.Errorf("title: %s (%+v)", where(got), got)
		}
		if got, _ := search(t, s, archive.Query{Pattern: "plan", Limit: 1}); where(got) != "newer#0:title" {
			t.Errorf("plan, limit 1: %s", where(got))
		}
		// Words apart by any white space: a phrase wrapped onto the next
		// line, or indented, is found as its snippet shows it (plain
		// "connection refused" found none of these), and words apart by
		// other text are not.
		appendOK(t, s, "wrapped", agent.PersistentMessage{Message: agent.UserText("dial tcp: Connection\n   refused; flaky\t\ttest; \"quoted\"\r\nwords\fhere; connection was refused")})
		flush(t, s)
		for _, q := range []string{"connection refused", "CONNECTION  REFUSED", "flaky test", `"quoted" words here`} {
			got, _ := search(t, s, archive.Query{Pattern: q})
			if where(got) != "wrapped#1:text" || got[0].Count != 1 {
				t.Errorf("%q in a wrapped text: %s (%+v)", q, where(got), got)
			}
		}
		if got, _ := search(t, s, archive.Query{Pattern: "connection refused"}); len(got) == 1 && got[0].Text != "Connection refused" {
			t.Errorf("the match is %q, want it folded", got[0].Text)
		}
		// A tool call is found by its name and input; text by a regular
		// expression; nothing in system prompts.
		if got, _ := search(t, s, archive.Query{Pattern: "go test ./..."}); where(got) != "every#4:tool_use" || got[0].Tool != "run" {
			t.Errorf("tool input: %s", where(got))
		}
		if got, _ := search(t, s, archive.Query{Pattern: `re:fix(ed)?\b`}); where(got) != "every#3:text every#6:text" {
			t.Errorf("regexp: %s", where(got))
		}
		if got, _ := search(t, s, archive.Query{Pattern: "careful assistant"}); len(got) != 0 {
			t.Errorf("system prompt: %s", where(got))
		}
		if got, _ := search(t, s, archive.Query{Pattern: `"urgent" <b>&</b>`}); where(got) != "every#3:text" {
			t.Errorf("quotes and markup: %s", where(got))
		}
		if got, _ := search(t, s, archive.Query{Pattern: "ÉMOJI 🚀"}); where(got) != "every#3:text" {
			t.Errorf("non-ASCII, case folded: %s", where(got))
		}
		if got, _ := search(t, s, archive.Query{Pattern: "e", Limit: 3}); len(got) != 3 {
			t.Errorf("limit 3: %d matches", len(got))
		}
		for _, bad := range []string{"", "re:", "re:a(b"} {
			if _, err := archive.Search(t.Context(), s, archive.Query{Pattern: bad}, archive.Options{}, func(archive.Match) error { return nil }); !errors.Is(err, archive.ErrBadQuery) {
				t.Errorf("query %q: %v", bad, err)
			}
		}
	})
}

func TestUsageByModel(t *testing.T) {
	byModel := archive.UsageQuery{By: archive.ByModel}
	eachStore(t, func(t *testing.T, s store.LogStore) {
		turn := func(id agent.WireIdentity, in, out int64) agent.PersistentMessage {
			m := agent.AssistantText("answer")
			m.Usage = &agent.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: 1}
			return agent.PersistentMessage{Message: m, Usage: m.Usage, Identity: id}
		}
		appendOK(t, s, "one", turn(modelA, 100, 10), turn(modelB, 1000, 1))
		appendOK(t, s, "two", turn(modelA, 5, 5), agent.PersistentMessage{Message: agent.UserText("no usage"), Identity: modelA})
		flush(t, s)
		report, stats, err := archive.Usage(t.Context(), s, byModel, archive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := report.Groups
		if report.Total.Sessions != 2 || report.Total.Turns != 3 || report.Total.Usage.InputTokens != 1105 {
			t.Errorf("total %+v", report.Total)
		}
		want := []archive.GroupUsage{
			{Key: "model-b", APIStyle: agent.APIStyleOpenAIChat, Sessions: 1, Turns: 1, Usage: agent.Usage{InputTokens: 1000, OutputTokens: 1, CacheReadTokens: 1}},
			{Key: "model-a", APIStyle: agent.APIStyleAnthropicMessages, Sessions: 2, Turns: 2, Usage: agent.Usage{InputTokens: 105, OutputTokens: 15, CacheReadTokens: 2}},
		}
		if a, b := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); a != b {
			t.Errorf("usage\n got %s\nwant %s", a, b)
		}
		if stats.Sessions != 2 {
			t.Errorf("stats %+v", stats)
		}
		// Priced, the group that cost most comes first, whatever its
		// tokens: model-a's are a thousand times dearer (panto usage
		// --prices listed a cheap model's dozens of dollars above an
		// expensive one's hundreds).
		priced := byModel
		priced.Cost = func(id agent.WireIdentity, u agent.Usage) (float64, bool) {
			if id.Model == "model-a" {
				return float64(u.InputTokens), true
			}
			return float64(u.InputTokens) / 1000, true
		}
		report, _, err = archive.Usage(t.Context(), s, priced, archive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Groups) != 2 || report.Groups[0].Key != "model-a" || report.Groups[0].Cost != 105 || report.Groups[1].Cost != 1 {
			t.Errorf("priced: %+v", report.Groups)
		}
		// A session modified since (an hour ahead, to leave the others
		// out), with an older turn: only the newer turn counts.
		now := time.Now().UTC().Add(time.Hour)
		old, err := sessionlog.EncodeBatch("three", true, []agent.PersistentMessage{turn(modelB, 7000, 7)}, now.Add(-48*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		recent, err := sessionlog.EncodeBatch("three", false, []agent.PersistentMessage{turn(modelB, 30, 3)}, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendLog(t.Context(), "three", store.Checkpoint{}, append(old, recent...)); err != nil {
			t.Fatal(err)
		}
		flush(t, s)
		report, _, err = archive.Usage(t.Context(), s, archive.UsageQuery{Since: now.Add(-30 * time.Minute)}, archive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got = report.Groups
		if len(got) != 1 || got[0].Key != "model-b" || got[0].Turns != 1 || got[0].Usage.InputTokens != 30 {
			t.Errorf("usage of the last hour: %+v", got)
		}
		// Nothing was written after that.
		report, stats, err = archive.Usage(t.Context(), s, archive.UsageQuery{Since: now.Add(time.Minute)}, archive.Options{})
		if err != nil || len(report.Groups) != 0 || stats.Sessions != 0 {
			t.Errorf("since after the last turn: %+v, %+v, %v", report, stats, err)
		}
	})
}

// TestUsageByProjectAndDay: by project, each session's turns count for
// the project its header records (none: the "" group); by day, each
// turn for the day it was written, in the location asked for; a filter
// on sessions reads only those.
func TestUsageByProjectAndDay(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.LogStore) {
		turn := func(in int64) agent.PersistentMessage {
			m := agent.AssistantText("answer")
			m.Usage = &agent.Usage{InputTokens: in}
			return agent.PersistentMessage{Message: m, Usage: m.Usage, Identity: modelA}
		}
		proj := agent.Project{Remote: "host.test/team/proj", Root: "/src/proj", Dir: "/src/proj"}
		other := agent.Project{Dir: "/tmp/other"}
		day1 := time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)
		day2 := day1.Add(time.Hour) // 00:30 on March 2nd, UTC
		for _, l := range []struct {
			id      string
			project agent.Project
			batches [][]agent.PersistentMessage
			at      []time.Time
		}{
			{"p1", proj, [][]agent.PersistentMessage{{turn(1)}, {turn(2)}}, []time.Time{day1, day2}},
			{"p2", proj, [][]agent.PersistentMessage{{turn(4)}}, []time.Time{day2}},
			{"o1", other, [][]agent.PersistentMessage{{turn(8)}}, []time.Time{day1}},
			// Imported, its directory (in proj's tree) gone: it counts in
			// proj, as --project counts it, not as a project of its own.
			{"i1", agent.Project{Dir: "/src/proj/old-subdir"}, [][]agent.PersistentMessage{{turn(32)}}, []time.Time{day1}},
			{"n1", agent.Project{}, [][]agent.PersistentMessage{{turn(16)}}, []time.Time{day1}},
		} {
			var log []byte
			for i, b := range l.batches {
				data, err := sessionlog.EncodeBatchIn(l.project, l.id, i == 0, b, l.at[i])
				if err != nil {
					t.Fatal(err)
				}
				log = append(log, data...)
			}
			if _, err := s.AppendLog(t.Context(), l.id, store.Checkpoint{}, log); err != nil {
				t.Fatal(err)
			}
		}
		flush(t, s)
		plus1 := time.FixedZone("UTC+1", 3600)
		for _, tt := range []struct {
			name string
			q    archive.UsageQuery
			want string // key:sessions:input tokens, in order
		}{
			{"by project", archive.UsageQuery{By: archive.ByProject}, "[host.test/team/proj:3:39 :1:16 /tmp/other:1:8]"},
			{"by day, UTC", archive.UsageQuery{By: archive.ByDay}, "[2026-03-01:4:57 2026-03-02:2:6]"},
			{"by day, UTC+1", archive.UsageQuery{By: archive.ByDay, Location: plus1}, "[2026-03-02:5:63]"},
			{"one project, by day", archive.UsageQuery{By: archive.ByDay, Sessions: func(info agent.SessionInfo) bool { return info.Project.Key() == proj.Key() }}, "[2026-03-01:1:1 2026-03-02:2:6]"},
		} {
			report, _, err := archive.Usage(t.Context(), s, tt.q, archive.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range report.Groups {
				got = append(got, fmt.Sprintf("%s:%d:%d", g.Key, g.Sessions, g.Usage.InputTokens))
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("%s: %v, want %s", tt.name, got, tt.want)
			}
			if tt.q.By == archive.ByProject && report.Groups[0].Project != proj {
				t.Errorf("%s: the project's group names %+v", tt.name, report.Groups[2].Project)
			}
		}
	})
}

func TestFork(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.LogStore) {
		msgs := storetest.RoundTripMessages()
		appendOK(t, s, "parent", msgs...)
		fork, err := archive.Fork(t.Context(), s, "parent", 3, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if fork.Info.Parent != "parent" || fork.Info.ForkedAt != 3 || fork.Info.MessageCount != 3 || fork.Info.ID == "parent" {
			t.Errorf("fork info %+v", fork.Info)
		}
		conv, err := s.Load(t.Context(), fork.Info.ID)
		if err != nil || len(conv.Messages) != 3 || conv.Messages[2].Text() != msgs[2].Message.Text() {
			t.Fatalf("fork holds %+v, %v", conv, err)
		}
		// At the tool call, the fork would hold calls without results.
		if _, err := archive.Fork(t.Context(), s, "parent", 4, time.Now()); err == nil || !strings.Contains(err.Error(), "fork at 5") {
			t.Errorf("fork at a tool call: %v", err)
		}
		if _, err := archive.Fork(t.Context(), s, "nosuch", 0, time.Now()); !errors.Is(err, agent.ErrSessionNotFound) {
			t.Errorf("fork of a missing session: %v", err)
		}
	})
}

// TestSearchSkipsBrokenSession: a session that cannot be read is
// reported, the others are searched.
func TestSearchSkipsBrokenSession(t *testing.T) {
	dir := t.TempDir()
	s, err := fsjsonl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	appendOK(t, s, "good", agent.PersistentMessage{Message: agent.UserText("needle here")})
	appendOK(t, s, "bad", agent.PersistentMessage{Message: agent.UserText("needle there")})
	path, _ := s.Path("bad")
	data, _ := json.Marshal(map[string]any{"type": "bogus"})
	appendRaw(t, path, append(data, '\n'))
	got, stats := search(t, s, archive.Query{Pattern: "needle"})
	if where(got) != "good#1:text" || len(stats.Skipped) != 1 || !strings.Contains(stats.Skipped[0].Error(), "bad") {
		t.Errorf("matches %s, skipped %v", where(got), stats.Skipped)
	}
}

func appendRaw(t *testing.T, path string, data []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, data...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestUsageOfAFork: the messages a fork copied from its parent are
// counted once, in the parent; the fork counts its own turns.
func TestUsageOfAFork(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.LogStore) {
		turn := func(in int64) agent.PersistentMessage {
			m := agent.AssistantText("answer")
			m.Usage = &agent.Usage{InputTokens: in}
			return agent.PersistentMessage{Message: m, Usage: m.Usage, Identity: modelA}
		}
		appendOK(t, s, "parent", agent.PersistentMessage{Message: agent.UserText("q1"), Identity: modelA}, turn(100), agent.PersistentMessage{Message: agent.UserText("q2"), Identity: modelA}, turn(1000))
		fork, err := archive.Fork(t.Context(), s, "parent", 2, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		appendOK(t, s, fork.Info.ID, agent.PersistentMessage{Message: agent.UserText("q3"), Identity: modelA}, turn(7))
		flush(t, s)
		report, _, err := archive.Usage(t.Context(), s, archive.UsageQuery{}, archive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tot := report.Total; tot.Usage.InputTokens != 1107 || tot.Turns != 3 || tot.Sessions != 2 {
			t.Errorf("total %+v, want 1107 input tokens in 3 answers of 2 sessions", tot)
		}
	})
}

// TestUsageOfAKeepBothCopy: a copy panto-sync's keep-both made of a
// diverged session (forked_from, the whole log) holds its parent's turns
// up to where the two parted: they count once, in the parent, and the
// copy counts its own. Once the parent is deleted, the copy counts them.
func TestUsageOfAKeepBothCopy(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.LogStore) {
		turn := func(in int64) agent.PersistentMessage {
			m := agent.AssistantText("answer")
			m.Usage = &agent.Usage{InputTokens: in}
			return agent.PersistentMessage{Message: m, Usage: m.Usage, Identity: modelA}
		}
		q := func(text string) agent.PersistentMessage {
			return agent.PersistentMessage{Message: agent.UserText(text), Identity: modelA}
		}
		other, err := fsjsonl.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// Both sides hold the first turn (synced), then each adds one.
		appendOK(t, s, "parent", q("q1"), turn(100))
		flush(t, s)
		if _, err := replica.Copy(t.Context(), s, other, replica.Options{}); err != nil {
			t.Fatal(err)
		}
		appendOK(t, s, "parent", q("q2 here"), turn(1000))
		appendOK(t, other, "parent", q("q2 there"), turn(7))
		sum, err := replica.Copy(t.Context(), other, s, replica.Options{KeepBoth: true})
		if err != nil || sum.Counts[replica.KeptBoth] != 1 {
			t.Fatalf("keep-both: %+v, %v", sum, err)
		}
		flush(t, s)
		usage := func() archive.GroupUsage {
			t.Helper()
			report, stats, err := archive.Usage(t.Context(), s, archive.UsageQuery{}, archive.Options{})
			if err != nil || len(stats.Skipped) != 0 {
				t.Fatalf("usage: %v, skipped %v", err, stats.Skipped)
			}
			return report.Total
		}
		if tot := usage(); tot.Usage.InputTokens != 1107 || tot.Turns != 3 || tot.Sessions != 2 {
			t.Errorf("total %+v, want 1107 input tokens in 3 answers of 2 sessions", tot)
		}
		at, err := store.Head(t.Context(), s, "parent")
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Delete(t.Context(), s, store.Tombstone{ID: "parent", Deleted: time.Now().UTC().Truncate(time.Second), At: at}); err != nil {
			t.Fatal(err)
		}
		flush(t, s)
		if tot := usage(); tot.Usage.InputTokens != 107 || tot.Turns != 2 || tot.Sessions != 1 {
			t.Errorf("the parent deleted: total %+v, want the copy's 107 input tokens in 2 answers", tot)
		}
	})
}

// TestSearchSince: with Since, a search finds the messages written at or
// after it, in the sessions modified since (their titles too), and does
// not read a session modified before it.
func TestSearchSince(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.LogStore) {
		since := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
		before, after := since.Add(-time.Hour), since.Add(time.Hour)
		for _, l := range []struct {
			id      string
			batches [][]agent.PersistentMessage
			at      []time.Time
		}{
			// Written to before and after: only the later message is found.
			{"both", [][]agent.PersistentMessage{{{Message: agent.UserText("deploy the old way")}}, {{Message: agent.UserText("deploy the new way")}, {Message: agent.TitleMessage("deploy notes")}}}, []time.Time{before, after}},
			// Untouched since: not read at all.
			{"old", [][]agent.PersistentMessage{{{Message: agent.UserText("deploy long ago")}, {Message: agent.TitleMessage("deploy, old")}}}, []time.Time{before}},
		} {
			var log []byte
			for i, b := range l.batches {
				data, err := sessionlog.EncodeBatchIn(agent.Project{}, l.id, i == 0, b, l.at[i])
				if err != nil {
					t.Fatal(err)
				}
				log = append(log, data...)
			}
			if _, err := s.AppendLog(t.Context(), l.id, store.Checkpoint{}, log); err != nil {
				t.Fatal(err)
			}
		}
		flush(t, s)
		got, stats := search(t, s, archive.Query{Pattern: "deploy", Since: since})
		if w := where(got); w != "both#0:title both#2:text" || stats.Sessions != 1 {
			t.Errorf("deploy since %s: %s, %d sessions read", since, w, stats.Sessions)
		}
		got, stats = search(t, s, archive.Query{Pattern: "deploy"})
		if len(got) != 5 || stats.Sessions != 2 {
			t.Errorf("deploy at any time: %s, %d sessions read", where(got), stats.Sessions)
		}
	})
}
