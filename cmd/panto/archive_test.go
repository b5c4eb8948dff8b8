package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/storetest"
	"github.com/panto-dev/panto/store"
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
	r := pantoOn(t, b, "sessions", "--json")
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
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			seed(t, b, roundTripID, storetest.RoundTripMessages()...)
			r := pantoOn(t, b, "title", roundTripID[:6], "Fix", "the", "bug")
			if !strings.Contains(r.stdout, `"Fix the bug"`) {
				t.Errorf("title: stdout %q", r.stdout)
			}
			if r := pantoOn(t, b, "sessions"); !strings.Contains(r.stdout, "Fix the bug") || strings.Contains(r.stdout, "Please fix") {
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
