package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/faultnet"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/storetest"
)

// The end-to-end tests of the commands that treat the store as an
// archive: title, fork, search, usage (export has its own file). Each
// runs the binary on a directory and on a bucket; every --json output is
// read as a script reads it, into maps, so that a renamed field fails.

// seed stores msgs as session id, straight through the store (the tests
// of these commands need sessions no fake provider writes: every block
// kind, two models, thinking), and makes them visible to other processes.
func seed(t *testing.T, b backend, id string, msgs ...agent.PersistentMessage) {
	t.Helper()
	st := b.open(t)
	if err := st.AppendMessages(context.Background(), id, msgs); err != nil {
		t.Fatal(err)
	}
	if err := store.Flush(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

// pantoOn runs panto against b's store and fails t unless it exits 0.
func pantoOn(t *testing.T, b backend, args ...string) result {
	t.Helper()
	r := runPanto(t, t.TempDir(), append([]string{"PANTO_STORE=" + b.spec}, b.env...), "", args...)
	if r.code != 0 {
		t.Fatalf("panto %q: exit %d; stderr %s", args, r.code, r.stderr)
	}
	return r
}

// pantoFails runs panto against b's store and fails t unless it exits
// non-zero with one line on stderr holding want.
func pantoFails(t *testing.T, b backend, want string, args ...string) {
	t.Helper()
	r := runPanto(t, t.TempDir(), append([]string{"PANTO_STORE=" + b.spec}, b.env...), "", args...)
	line := strings.TrimSuffix(r.stderr, "\n")
	if r.code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, want) {
		t.Errorf("panto %q: exit %d, stderr %q; want a failure saying %q", args, r.code, r.stderr, want)
	}
}

// jsonObject decodes one JSON object as a script would.
func jsonObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, s)
	}
	return m
}

// sessionsJSON is panto sessions --json as a script sees it, by id.
func sessionsJSON(t *testing.T, b backend) map[string]map[string]any {
	t.Helper()
	r := pantoOn(t, b, "sessions", "--all", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("sessions --json: %v: %s", err, r.stdout)
	}
	out := map[string]map[string]any{}
	for _, s := range list {
		id, _ := s["id"].(string)
		out[id] = s
	}
	return out
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// roundTripID is the session seeded with storetest.RoundTripMessages:
// every block kind; message 4 is an assistant's thinking, redacted
// thinking, text and two tool calls, message 5 their results.
const roundTripID = "a0000000000000000000000000000001"

func TestTitle(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			seed(t, b, roundTripID, storetest.RoundTripMessages()...)
			r := pantoOn(t, b, "title", roundTripID[:6], "Fix", "the", "bug")
			if !strings.Contains(r.stdout, `"Fix the bug"`) {
				t.Errorf("title: stdout %q", r.stdout)
			}
			if r := pantoOn(t, b, "sessions", "--all"); !strings.Contains(r.stdout, "Fix the bug") || strings.Contains(r.stdout, "Please fix") {
				t.Errorf("sessions shows no title, or the last prompt instead:\n%s", r.stdout)
			}
			// Flags after the arguments; the latest title wins.
			r = pantoOn(t, b, "title", roundTripID[:6], "The \"second\" title", "--json")
			if m := jsonObject(t, r.stdout); m["id"] != roundTripID || m["title"] != `The "second" title` {
				t.Errorf("title --json = %v", m)
			}
			s := sessionsJSON(t, b)[roundTripID]
			if s["title"] != `The "second" title` || s["messages"] != float64(len(storetest.RoundTripMessages())+2) {
				t.Errorf("sessions --json after two titles: %v", s)
			}
			if r := pantoOn(t, b, "show", roundTripID); !strings.Contains(r.stdout, `"The \"second\" title"`) || !strings.Contains(r.stdout, "── #10 title\nFix the bug") {
				t.Errorf("show:\n%s", r.stdout)
			}
			pantoOn(t, b, "title", "--clear", roundTripID)
			if s := sessionsJSON(t, b)[roundTripID]; s["title"] != nil {
				t.Errorf("title after --clear: %v", s["title"])
			}
			pantoFails(t, b, "give the title", "title", roundTripID)
			pantoFails(t, b, "give a session id", "title")
			pantoFails(t, b, "session not found", "title", "ffffff", "x")
		})
	}
}

// TestSessionsJSONFields: panto sessions --json has every field a script
// reads, spelled as documented, for a fork with a title and usage.
func TestSessionsJSONFields(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			seed(t, b, roundTripID, storetest.RoundTripMessages()...)
			pantoOn(t, b, "title", roundTripID, "named")
			fork := jsonObject(t, pantoOn(t, b, "fork", "--at", "6", "--json", roundTripID).stdout)
			got := sessionsJSON(t, b)
			// The parent has its title; the fork, of the messages before
			// the title entry, has none, and links to the parent.
			p, f := got[roundTripID], got[fork["id"].(string)]
			common := []string{"api_style", "base_url", "created", "id", "last_user_message", "messages", "model", "modified", "reasoning", "usage"}
			if want := append([]string{"title"}, common...); !sameKeys(keys(p), want) {
				t.Errorf("parent's fields %v, want %v", keys(p), want)
			}
			if want := append([]string{"forked_at", "parent"}, common...); !sameKeys(keys(f), want) {
				t.Errorf("fork's fields %v, want %v", keys(f), want)
			}
			u, _ := f["usage"].(map[string]any)
			if !reflect.DeepEqual(keys(u), []string{"cache_read_tokens", "cache_write_tokens", "input_tokens", "output_tokens", "reasoning_tokens"}) ||
				u["input_tokens"] != float64(1200) || u["output_tokens"] != float64(348) || u["cache_read_tokens"] != float64(1000) ||
				u["cache_write_tokens"] != float64(67) || u["reasoning_tokens"] != float64(89) {
				t.Errorf("fork's usage %v", u)
			}
			if f["parent"] != roundTripID || f["forked_at"] != float64(6) || f["messages"] != float64(6) || p["title"] != "named" {
				t.Errorf("fork %v, parent %v", f, p)
			}
		})
	}
}

func sameKeys(a, b []string) bool {
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestFork(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			msgs := storetest.RoundTripMessages()
			seed(t, b, roundTripID, msgs...)
			before := parentLog(t, b)
			r := pantoOn(t, b, "fork", roundTripID[:8], "--at", "3", "--json")
			fork := jsonObject(t, r.stdout)
			id, _ := fork["id"].(string)
			if len(id) != 32 || fork["parent"] != roundTripID || fork["forked_at"] != float64(3) || len(fork) != 3 {
				t.Fatalf("fork --json = %v", fork)
			}
			s := sessionsJSON(t, b)[id]
			if s["parent"] != roundTripID || s["forked_at"] != float64(3) || s["messages"] != float64(3) {
				t.Errorf("sessions --json of the fork: %v", s)
			}
			show := pantoOn(t, b, "show", id).stdout
			if !strings.Contains(show, "forked from "+roundTripID+" at message 3") || !strings.Contains(show, "── #3 user\nPlease fix the bug") || strings.Contains(show, "#4") {
				t.Errorf("show of the fork:\n%s", show)
			}
			// The fork holds the parent's messages; the parent is
			// unchanged.
			conv, err := b.open(t).Load(context.Background(), id)
			if err != nil || len(conv.Messages) != 3 || !reflect.DeepEqual(conv.Messages[2].Metadata, msgs[2].Message.Metadata) {
				t.Fatalf("load the fork: %v, %+v", err, conv)
			}
			if after := parentLog(t, b); !bytes.Equal(after, before) {
				t.Error("the fork changed its parent's log")
			}
			// Without --at: all of it.
			r = pantoOn(t, b, "fork", roundTripID)
			if !strings.Contains(r.stdout, "the first 9 messages of "+roundTripID[:8]) {
				t.Errorf("fork: %s", r.stdout)
			}
			pantoFails(t, b, "fork at 5", "fork", roundTripID, "--at", "4")
			pantoFails(t, b, "holds 9 messages", "fork", roundTripID, "--at", "10")
			pantoFails(t, b, "1 or more", "fork", roundTripID, "--at", "0")
			pantoFails(t, b, "give a session id", "fork")
		})
	}
}

// parentLog is the committed log of the round-trip session.
func parentLog(t *testing.T, b backend) []byte {
	t.Helper()
	ls := b.open(t).(store.LogStore)
	r, _, err := ls.ReadLog(context.Background(), roundTripID, 0)
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

// thinkingID is a newer session whose answer thinks "the secret plan".
const thinkingID = "b0000000000000000000000000000002"

func seedSearch(t *testing.T, b backend) {
	t.Helper()
	seed(t, b, roundTripID, storetest.RoundTripMessages()...)
	time.Sleep(20 * time.Millisecond) // newer
	answer := agent.Message{Role: agent.RoleAssistant, StopReason: "end_turn", Usage: &agent.Usage{InputTokens: 50, OutputTokens: 7}, Content: []agent.Block{
		{Type: agent.BlockThinking, Text: "the secret plan is to say little", Signature: "s"},
		agent.TextBlock("There is a plan, and it exits with status 0."),
	}}
	ident := agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://b.test/v1", Model: "model-b"}
	seed(t, b, thinkingID,
		agent.PersistentMessage{Message: agent.UserText("what is the plan?"), Identity: ident},
		agent.PersistentMessage{Message: answer, Usage: answer.Usage, Identity: ident})
}

func TestSearch(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			seedSearch(t, b)
			// A hit in a tool result, case-insensitively.
			r := pantoOn(t, b, "search", "EXIT STATUS 1")
			if !strings.Contains(r.stdout, roundTripID[:8]+" #5 tool (result)\n    exit status 1: \"quotes\" <tags> & unicode ✓\n") {
				t.Errorf("search in tool results:\n%s", r.stdout)
			}
			// The match's session, then the sessions searched: "1 match
			// in 2 sessions" said of one found in one of two.
			if !strings.Contains(r.stderr, "1 match in 1 session (2 sessions searched, ") || !strings.Contains(r.stderr, "read in") {
				t.Errorf("search says %q", r.stderr)
			}
			// Thinking only when asked.
			if r := pantoOn(t, b, "search", "secret plan"); r.stdout != "" || !strings.Contains(r.stderr, "0 matches") {
				t.Errorf("search without --thinking found thinking: %q %q", r.stdout, r.stderr)
			}
			r = pantoOn(t, b, "search", "--thinking", "secret plan")
			if !strings.Contains(r.stdout, thinkingID[:8]+" #2 assistant (thinking)") {
				t.Errorf("search --thinking:\n%s", r.stdout)
			}
			// --json, one object per match, newest session first; a
			// regular expression; flags after the query.
			r = pantoOn(t, b, "search", `re:exit(s| status)`, "--json")
			var matches []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				matches = append(matches, jsonObject(t, line))
			}
			if len(matches) != 2 {
				t.Fatalf("search --json: %d matches:\n%s", len(matches), r.stdout)
			}
			m := matches[1]
			want := []string{"block", "count", "match", "message", "role", "session", "snippet", "ts"}
			if !reflect.DeepEqual(keys(m), want) {
				t.Errorf("match fields %v, want %v", keys(m), want)
			}
			if m["session"] != roundTripID || m["message"] != float64(5) || m["block"] != "tool_result" || m["match"] != "exit status" ||
				!strings.HasPrefix(m["snippet"].(string), "exit status 1") || m["count"] != float64(1) || m["role"] != "user" {
				t.Errorf("match %v", m)
			}
			if first := matches[0]; first["session"] != thinkingID || first["match"] != "exits" || first["message"] != float64(2) {
				t.Errorf("first match %v", first)
			}
			// A tool call by its input; --limit.
			if r := pantoOn(t, b, "search", "go test ./...", "--json"); !strings.Contains(r.stdout, `"tool": "run"`) && !strings.Contains(r.stdout, `"tool":"run"`) {
				t.Errorf("search in tool input: %s", r.stdout)
			}
			if r := pantoOn(t, b, "search", "--limit", "1", "e"); strings.Count(r.stdout, "\n    ") != 1 || !strings.Contains(r.stderr, "--limit 1") {
				t.Errorf("--limit 1: %q %q", r.stdout, r.stderr)
			}
			pantoFails(t, b, "give the text to find", "search")
			pantoFails(t, b, "re:EXPR", "search", "re:a(b")
			pantoFails(t, b, "--since", "search", "--since", "soon", "e")
			if r := pantoOn(t, b, "search", "--since", "1h", "go test ./..."); !strings.Contains(r.stdout, "go test ./...") {
				t.Errorf("search --since 1h of what was just written: %q %q", r.stdout, r.stderr)
			}
			// A session's title, the name it is remembered by.
			pantoOn(t, b, "title", thinkingID, "Deploy checklist")
			if r := pantoOn(t, b, "search", "CHECKLIST"); r.stdout != thinkingID[:8]+" title\n    Deploy checklist\n" {
				t.Errorf("search of a title: %q", r.stdout)
			}
			if m := jsonObject(t, pantoOn(t, b, "search", "checklist", "--json").stdout); m["block"] != "title" || m["message"] != float64(0) || m["title"] != "Deploy checklist" {
				t.Errorf("search --json of a title: %v", m)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			seedSearch(t, b)
			r := pantoOn(t, b, "usage", "--json")
			u := jsonObject(t, r.stdout)
			if !reflect.DeepEqual(keys(u), []string{"by", "bytes_read", "models", "sessions_read", "total"}) {
				t.Errorf("usage --json fields %v", keys(u))
			}
			models, _ := u["models"].([]any)
			if len(models) != 2 {
				t.Fatalf("usage --json: %d models: %s", len(models), r.stdout)
			}
			a := models[0].(map[string]any)
			want := []string{"answers", "api_style", "cache_read_tokens", "cache_write_tokens", "input_tokens", "model", "output_tokens", "reasoning_tokens", "sessions"}
			if !reflect.DeepEqual(keys(a), want) {
				t.Errorf("model fields %v, want %v", keys(a), want)
			}
			if a["model"] != "model-a" || a["input_tokens"] != float64(1200) || a["output_tokens"] != float64(348) || a["answers"] != float64(2) || a["sessions"] != float64(1) {
				t.Errorf("model-a %v", a)
			}
			total := u["total"].(map[string]any)
			if total["input_tokens"] != float64(1250) || total["output_tokens"] != float64(355) || total["sessions"] != float64(2) || u["sessions_read"] != float64(2) {
				t.Errorf("total %v, sessions read %v", total, u["sessions_read"])
			}
			r = pantoOn(t, b, "usage")
			for _, w := range []string{"MODEL", "model-a", "model-b", "total", "1,250", "1,000"} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("usage lacks %q:\n%s", w, r.stdout)
				}
			}
			// The last hour holds it all; nothing is that far ahead.
			if r := pantoOn(t, b, "usage", "--since", "1h", "--json"); jsonObject(t, r.stdout)["total"].(map[string]any)["input_tokens"] != float64(1250) {
				t.Errorf("usage --since 1h: %s", r.stdout)
			}
			// Days and weeks, as prune's --older-than takes them: a
			// month's cost is --since 30d.
			for _, since := range []string{"1d", "2w"} {
				if r := pantoOn(t, b, "usage", "--since", since, "--json"); jsonObject(t, r.stdout)["total"].(map[string]any)["input_tokens"] != float64(1250) {
					t.Errorf("usage --since %s: %s", since, r.stdout)
				}
			}
			// Priced: model-a (Anthropic's counts) by the table, model-b
			// not in it, marked and named.
			prices := filepath.Join(t.TempDir(), "prices.json")
			if err := os.WriteFile(prices, []byte(`{"sample_spec": {"input_cost_per_token": 0, "output_cost_per_token": 0},
				"anthropic/model-a": {"input_cost_per_token": 1e-3, "output_cost_per_token": 2e-3, "cache_read_input_token_cost": 1e-4, "cache_creation_input_token_cost": 1e-3}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			r = pantoOn(t, b, "usage", "--prices", prices)
			for _, w := range []string{"COST", "$2.06\n", "$0.00*\n", "$2.06*\n"} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("usage --prices lacks %q:\n%s", w, r.stdout)
				}
			}
			if !strings.Contains(r.stderr, `* 1 answer of 1 model not in COST: `+prices+` has no price for "model-b"`) {
				t.Errorf("usage --prices does not name the model it has no price for: %q", r.stderr)
			}
			u = jsonObject(t, pantoOn(t, b, "usage", "--prices", prices, "--json").stdout)
			a = u["models"].([]any)[0].(map[string]any)
			total = u["total"].(map[string]any)
			if cost, _ := a["cost_usd"].(float64); math.Abs(cost-(1200*1e-3+348*2e-3+1000*1e-4+67*1e-3)) > 1e-9 || total["unpriced_answers"] != float64(1) || !reflect.DeepEqual(u["unpriced_models"], []any{"model-b"}) {
				t.Errorf("usage --prices --json: model-a %v, total %v, unpriced %v", a, total, u["unpriced_models"])
			}
			pantoFails(t, b, "give --prices a table of LiteLLM's format", "usage", "--prices", filepath.Join(t.TempDir(), "none.json"))
			pantoFails(t, b, "more than zero", "usage", "--since", "-1h")
			pantoFails(t, b, "write e.g. 90d, 2w or 12h", "usage", "--since", "a while")
			// show --json has them too, as panto sessions --json spells them.
			shown := jsonObject(t, pantoOn(t, b, "show", "--json", roundTripID).stdout)
			if !sameKeys(keys(shown), []string{"messages", "session"}) {
				t.Errorf("show --json fields %v", keys(shown))
			}
			if su, _ := shown["session"].(map[string]any)["usage"].(map[string]any); su["cache_write_tokens"] != float64(67) {
				t.Errorf("show --json usage %v", su)
			}
			// show ends with the session's totals.
			if r := pantoOn(t, b, "show", roundTripID); !strings.HasSuffix(r.stdout, "tokens: 1,200 input · 348 output · 1,000 cache read · 67 cache write · 89 reasoning\n") {
				t.Errorf("show does not end with the totals:\n%s", r.stdout[max(0, len(r.stdout)-300):])
			}
		})
	}
}

// TestBucketSearchReadsAtOnce: panto search and usage read a bucket's
// sessions 32 at a time, local-first and --direct: their reads wait on
// the network, and read eight at a time a new machine's search of 8,000
// sessions took 65 s at a 60 ms round trip (16 s at 32). Measured as the
// most sessions whose requests were in flight together, from the
// request trace, behind a link of a 100 ms round trip.
func TestBucketSearchReadsAtOnce(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	b := s3Backend(t)
	st := b.open(t)
	ident := agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://b.test/v1", Model: "model-b"}
	answer := agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("found it")}, Usage: &agent.Usage{InputTokens: 10, OutputTokens: 2}}
	const sessions = 48
	for i := range sessions {
		err := st.AppendMessages(context.Background(), fmt.Sprintf("c%031x", i), []agent.PersistentMessage{
			{Message: agent.UserText(fmt.Sprintf("needle %d", i)), Identity: ident},
			{Message: answer, Usage: answer.Usage, Identity: ident}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Flush(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	px := faultnet.New(t, srv.Endpoint())
	if _, err := px.Add(faultnet.Fault{Type: "latency", Attributes: map[string]int64{"latency": 50}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"search", "-v", "--limit", "0", "needle"},
		{"search", "-v", "--limit", "0", "--direct", "needle"},
		{"usage", "-v"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// A new home: a new machine's replica, which holds none of them.
			r := runPanto(t, t.TempDir(), append(b.storeEnv(), "AWS_ENDPOINT_URL_S3="+px.URL()), "", args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if n := sessionsInFlight(t, r.stderr); n < 24 {
				t.Errorf("at most %d sessions read at once, want 32 (or nearly: the reads start as the scheduler lets them)", n)
			}
		})
	}
}

// sessionsInFlight is the most sessions whose requests (from the first
// one's start to the last one's end, in a -v trace) overlapped.
func sessionsInFlight(t *testing.T, trace string) int {
	t.Helper()
	type span struct{ start, end time.Time }
	spans := map[string]*span{}
	for _, line := range strings.Split(trace, "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		_, rest, ok := strings.Cut(f["key"], "/sessions/")
		if f["msg"] != "s3" || !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, "/")
		end, err := time.Parse(time.RFC3339Nano, f["time"])
		ms, err2 := strconv.ParseFloat(f["ms"], 64)
		if err != nil || err2 != nil {
			t.Fatalf("trace line %q: %v %v", line, err, err2)
		}
		start := end.Add(-time.Duration(ms * float64(time.Millisecond)))
		if s := spans[id]; s == nil {
			spans[id] = &span{start, end}
		} else {
			s.start, s.end = minTime(s.start, start), maxTime(s.end, end)
		}
	}
	if len(spans) == 0 {
		t.Fatalf("no session read in the trace:\n%s", trace)
	}
	most := 0
	for _, s := range spans {
		n := 0
		for _, o := range spans {
			if !o.start.After(s.start) && o.end.After(s.start) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestReadProgressOnATerminal: on a terminal, search and usage show how
// many of the sessions they have read, in a bar on stderr that is
// cleared before a match is printed and when they are done (a new
// machine's search of a bucket reads for many seconds, and said nothing
// meanwhile); not with --json, nor when stdout is not a terminal.
func TestReadProgressOnATerminal(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	st := b.open(t)
	for i := range 3 {
		if err := st.AppendMessages(t.Context(), fmt.Sprintf("d%031x", i), []agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("needle %d", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args             []string
		terminal, stderr bool // stdout, stderr a terminal
		bar              bool
	}{
		{[]string{"search", "needle"}, true, true, true},
		{[]string{"usage"}, true, true, true},
		{[]string{"search", "--json", "needle"}, true, true, false},
		{[]string{"usage", "--json"}, true, true, false},
		{[]string{"search", "needle"}, false, true, false}, // | less
		{[]string{"search", "needle"}, true, false, false}, // 2>log
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, stdoutIsTerminal: tc.terminal, stderrIsTerminal: tc.stderr, now: time.Now}
		if code := runInProcess(t.Context(), e, append([]string{"panto", "--store", b.spec}, tc.args...)); code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, code, errb.String())
		}
		if got := strings.Contains(errb.String(), "(1/3)"); got != tc.bar {
			t.Errorf("%q, stdout a terminal %v, stderr %v: a bar %v, want %v; stderr %q", tc.args, tc.terminal, tc.stderr, got, tc.bar, errb.String())
		}
		// Cleared: blanked out, then the last line written over it.
		if parts := strings.Split(errb.String(), "\r"); tc.bar && (len(parts) < 3 || strings.TrimLeft(parts[len(parts)-2], " ") != "") {
			t.Errorf("%q: the bar is not cleared: %q", tc.args, errb.String())
		}
	}
}
