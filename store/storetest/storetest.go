// Package storetest is the conformance suite every agent.SessionStore
// runs. A store's own test calls Run with a Harness that makes fresh
// stores:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T) agent.SessionStore { return openStore(t, t.TempDir()) },
//			Reopen: func(t *testing.T, s agent.SessionStore) agent.SessionStore { ... },
//		})
//	}
//
// The suite checks the contract of agent.SessionStore as a user of the
// interface sees it: sessions come into existence with their first
// append, a batch is all or nothing, every block kind, the stop reason
// and metadata round-trip, the wire identity is kept for user and assistant entries but
// not system ones, no provenance (and so no key material) comes back,
// list order and summaries (the title, token totals and a fork's parent
// link included), resolve by id or prefix, latest, not-found and
// invalid-id errors, concurrent appenders (through one handle and,
// with Reopen, through three), and, with Newer, that no append adds to a
// log of a newer line format. Checks of the stored bytes belong in each
// store's own tests. The suite is kept small enough to run against a real
// object store on every test run.
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
)

// Harness tells Run how to get stores.
type Harness struct {
	// New returns a fresh, empty store for one subtest.
	New func(t *testing.T) agent.SessionStore
	// Reopen, if set, returns another independent handle (as another
	// process would open) on the same backing data as s.
	Reopen func(t *testing.T, s agent.SessionStore) agent.SessionStore
	// Settle, if set, makes the appends s has returned visible to the
	// List, Resolve and Latest of other handles, for a store that writes
	// its catalog after an append returns (objstore's Flush). Load through
	// another handle, and everything through s itself, must see a returned
	// append without it. Nil when appends are visible everywhere at once.
	Settle func(t *testing.T, s agent.SessionStore)
	// Discards is true for a store that keeps nothing (null): the suite
	// then checks that behaviour instead.
	Discards bool
	// Newer, if set, stores log (a session's committed bytes, whose header
	// names a newer line format) as session id in s, the way a newer
	// panto would, below the store's API; it returns a function that
	// reads back everything stored of the session, so the suite can see
	// that a refused append touched nothing.
	Newer func(t *testing.T, s agent.SessionStore, id string, log []byte) (stored func() []byte)
}

func (h Harness) settle(t *testing.T, s agent.SessionStore) {
	t.Helper()
	if h.Settle != nil {
		h.Settle(t, s)
	}
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("storetest: Harness.New is nil")
	}
	if h.Discards {
		t.Run("Discards", func(t *testing.T) { testDiscards(t, h) })
		t.Run("InvalidIDs", func(t *testing.T) { testInvalidIDs(t, h) })
		return
	}
	t.Run("CreateOnFirstAppend", func(t *testing.T) { testCreateOnFirstAppend(t, h) })
	t.Run("BatchAtomicity", func(t *testing.T) { testBatchAtomicity(t, h) })
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, h) })
	t.Run("Identity", func(t *testing.T) { testIdentity(t, h) })
	t.Run("NoKeyMaterial", func(t *testing.T) { testNoKeyMaterial(t, h) })
	t.Run("ListOrder", func(t *testing.T) { testListOrder(t, h) })
	t.Run("Resolve", func(t *testing.T) { testResolve(t, h) })
	t.Run("InvalidIDs", func(t *testing.T) { testInvalidIDs(t, h) })
	t.Run("Latest", func(t *testing.T) { testLatest(t, h) })
	t.Run("TitleAndUsage", func(t *testing.T) { testTitleAndUsage(t, h) })
	t.Run("Project", func(t *testing.T) { testProject(t, h) })
	t.Run("ConcurrentAppenders", func(t *testing.T) { testConcurrentAppenders(t, h) })
	if h.Reopen != nil {
		t.Run("Reopen", func(t *testing.T) { testReopen(t, h) })
	}
	runLogStore(t, h)
	runDeleter(t, h)
	runNewer(t, h)
}

// Identities used across the suite.
var (
	identityA = agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://api.anthropic.test", Model: "model-a", Reasoning: agent.ReasoningHigh}
	identityB = agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://127.0.0.1:8080/v1", Model: "model-b", Reasoning: agent.ReasoningLow}
	identityS = agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "https://system.test", Model: "model-system", Reasoning: agent.ReasoningMedium}
)

func pm(m agent.Message, id agent.WireIdentity) agent.PersistentMessage {
	return agent.PersistentMessage{Message: m, Usage: m.Usage, Identity: id}
}

func texts(prefix string, n int) []agent.PersistentMessage {
	out := make([]agent.PersistentMessage, n)
	for i := range out {
		m := agent.UserText(fmt.Sprintf("%s-%d", prefix, i))
		if i%2 == 1 {
			m = agent.AssistantText(fmt.Sprintf("%s-%d", prefix, i))
		}
		out[i] = pm(m, identityA)
	}
	return out
}

func appendOK(t *testing.T, s agent.SessionStore, id string, msgs []agent.PersistentMessage) {
	t.Helper()
	if err := s.AppendMessages(t.Context(), id, msgs); err != nil {
		t.Fatalf("AppendMessages(%s, %d messages): %v", id, len(msgs), err)
	}
}

func loadOK(t *testing.T, s agent.SessionStore, id string) *agent.Conversation {
	t.Helper()
	conv, err := s.Load(t.Context(), id)
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	if conv == nil {
		t.Fatalf("Load(%s) returned a nil conversation and no error", id)
	}
	return conv
}

func listOK(t *testing.T, s agent.SessionStore) []agent.SessionInfo {
	t.Helper()
	infos, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return infos
}

func listIDs(infos []agent.SessionInfo) []string {
	ids := make([]string, len(infos))
	for i, info := range infos {
		ids[i] = info.ID
	}
	return ids
}

func infoOf(t *testing.T, s agent.SessionStore, id string) agent.SessionInfo {
	t.Helper()
	for _, info := range listOK(t, s) {
		if info.ID == id {
			return info
		}
	}
	t.Fatalf("List does not contain session %s", id)
	return agent.SessionInfo{}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one that is %v", what, err, target)
	}
}

// sameTexts checks that conv holds messages with exactly these texts.
func sameTexts(t *testing.T, what string, conv *agent.Conversation, want []agent.PersistentMessage) {
	t.Helper()
	got := make([]string, len(conv.Messages))
	for i, m := range conv.Messages {
		got[i] = string(m.Role) + ":" + m.Text()
	}
	exp := make([]string, len(want))
	for i, p := range want {
		exp[i] = string(p.Message.Role) + ":" + p.Message.Text()
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("%s: messages\n got %q\nwant %q", what, got, exp)
	}
}

func testDiscards(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	sess := s.Create()
	if err := agent.ValidateSessionID(sess.Info.ID); err != nil {
		t.Fatalf("Create minted an invalid id: %v", err)
	}
	if err := sess.Append(ctx, texts("discarded", 2)); err != nil {
		t.Fatalf("Append: %v", err)
	}
	appendOK(t, s, "chosen-id", texts("discarded", 3))
	if infos := listOK(t, s); len(infos) != 0 {
		t.Errorf("List = %v, want nothing", listIDs(infos))
	}
	_, err := s.Load(ctx, sess.Info.ID)
	wantErr(t, "Load", err, agent.ErrSessionNotFound)
	_, err = s.Resolve(ctx, sess.Info.ID)
	wantErr(t, "Resolve", err, agent.ErrSessionNotFound)
	_, err = s.Latest(ctx)
	wantErr(t, "Latest", err, agent.ErrSessionNotFound)
}

func testCreateOnFirstAppend(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	a, b := s.Create(), s.Create()
	if a == nil || b == nil {
		t.Fatal("Create returned nil")
	}
	if err := agent.ValidateSessionID(a.Info.ID); err != nil {
		t.Fatalf("Create minted an invalid id: %v", err)
	}
	if a.Info.ID == b.Info.ID {
		t.Fatalf("two Creates minted the same id %s", a.Info.ID)
	}
	if a.Store == nil {
		t.Fatal("Create returned a session with no Store")
	}
	// Nothing exists until the first append.
	if infos := listOK(t, s); len(infos) != 0 {
		t.Fatalf("List after Create = %v, want nothing (Create must do no I/O)", listIDs(infos))
	}
	_, err := s.Load(ctx, a.Info.ID)
	wantErr(t, "Load before first append", err, agent.ErrSessionNotFound)
	_, err = s.Resolve(ctx, a.Info.ID)
	wantErr(t, "Resolve before first append", err, agent.ErrSessionNotFound)
	_, err = s.Latest(ctx)
	wantErr(t, "Latest of an empty store", err, agent.ErrSessionNotFound)

	// An empty batch does nothing, not even create the session.
	if err := s.AppendMessages(ctx, a.Info.ID, nil); err != nil {
		t.Fatalf("AppendMessages of an empty batch: %v", err)
	}
	if infos := listOK(t, s); len(infos) != 0 {
		t.Fatalf("List after an empty batch = %v, want nothing", listIDs(infos))
	}

	msgs := texts("first", 2)
	if err := a.Append(ctx, msgs); err != nil {
		t.Fatalf("first Append: %v", err)
	}
	infos := listOK(t, s)
	if got := listIDs(infos); !reflect.DeepEqual(got, []string{a.Info.ID}) {
		t.Fatalf("List after first append = %v, want [%s]", got, a.Info.ID)
	}
	if infos[0].MessageCount != 2 {
		t.Errorf("MessageCount = %d, want 2", infos[0].MessageCount)
	}
	if infos[0].Created.IsZero() || infos[0].Modified.IsZero() || infos[0].Modified.Before(infos[0].Created) {
		t.Errorf("Created %v, Modified %v: want both set, Modified >= Created", infos[0].Created, infos[0].Modified)
	}
	sameTexts(t, "Load after first append", loadOK(t, s, a.Info.ID), msgs)
	conv, err := a.Load(ctx)
	if err != nil {
		t.Fatalf("Session.Load: %v", err)
	}
	sameTexts(t, "Session.Load", conv, msgs)
	_, err = s.Load(ctx, b.Info.ID)
	wantErr(t, "Load of the other, never appended session", err, agent.ErrSessionNotFound)
}

func testBatchAtomicity(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	unencodable := func(kind string) agent.PersistentMessage {
		m := agent.UserText("unencodable " + kind)
		switch kind {
		case "chan":
			m.Metadata = map[string]any{"c": make(chan int)}
		default:
			m.Metadata = map[string]any{"nested": map[string]any{"f": func() {}}}
		}
		return pm(m, identityA)
	}

	// A failing first batch must not create the session.
	fresh := "atomic-fresh"
	bad := append(texts("fresh", 2), unencodable("func"))
	if err := s.AppendMessages(ctx, fresh, bad); err == nil {
		t.Fatal("AppendMessages of a batch holding a func in Metadata succeeded")
	}
	if infos := listOK(t, s); len(infos) != 0 {
		t.Fatalf("List after a failed first batch = %v, want nothing", listIDs(infos))
	}
	_, err := s.Load(ctx, fresh)
	wantErr(t, "Load after a failed first batch", err, agent.ErrSessionNotFound)

	// A failing later batch leaves the session as it was.
	id := "atomic-later"
	first := texts("whole", 5)
	appendOK(t, s, id, first)
	sameTexts(t, "a 5-message batch", loadOK(t, s, id), first)
	bad = []agent.PersistentMessage{pm(agent.UserText("half 0"), identityA), pm(agent.AssistantText("half 1"), identityB), unencodable("chan")}
	if err := s.AppendMessages(ctx, id, bad); err == nil {
		t.Fatal("AppendMessages of a batch holding a channel in Metadata succeeded")
	}
	sameTexts(t, "Load after a failed batch", loadOK(t, s, id), first)
	if info := infoOf(t, s, id); info.MessageCount != len(first) || info.LastUserMessage != "whole-4" || info.Model != identityA.Model {
		t.Errorf("info after a failed batch: count %d, last user %q, model %q; want %d, %q, %q",
			info.MessageCount, info.LastUserMessage, info.Model, len(first), "whole-4", identityA.Model)
	}
	// And the session still takes appends.
	more := texts("after", 3)
	appendOK(t, s, id, more)
	sameTexts(t, "Load after the next batch", loadOK(t, s, id), append(append([]agent.PersistentMessage{}, first...), more...))
}

// RoundTripMessages holds every block kind, stop reasons, usage and
// metadata: what the suite checks a store keeps, and what a reader of
// sessions (an export, say) must render.
func RoundTripMessages() []agent.PersistentMessage {
	usage := &agent.Usage{InputTokens: 1200, OutputTokens: 345, CacheReadTokens: 1000, CacheWriteTokens: 67, ReasoningTokens: 89}
	assistant := agent.Message{
		Role: agent.RoleAssistant,
		Content: []agent.Block{
			{Type: agent.BlockThinking, Text: "Let me look at the file first.", Signature: "sig-EqQBCkYIARgCKkA+/="},
			{Type: agent.BlockRedactedThinking, Data: "EmwKAhgBEgy3va+/3Q4lYz0Kp1xr=="},
			agent.TextBlock("I'll read it."),
			agent.ToolUseBlock("toolu_01", "read_file", json.RawMessage(`{"path":"main.go","range":[1,20],"opts":{"follow":true,"enc":null}}`)),
			agent.ToolUseBlock("toolu_02", "run", json.RawMessage(`{"cmd":"go test ./...","timeout":30.5}`)),
		},
		Usage:      usage,
		StopReason: "tool_use",
		Metadata: map[string]any{
			"request_id": "req_011CTf",
			"latency_ms": float64(812.5),
		},
	}
	results := agent.Message{
		Role: agent.RoleUser,
		Content: []agent.Block{
			agent.ToolResultBlock("toolu_01", "package main\n\nfunc main() {}\n", false),
			agent.ToolResultBlock("toolu_02", "exit status 1: \"quotes\" <tags> & unicode ✓", true),
		},
	}
	user := agent.UserText("Please fix the bug in main.go — it's \"urgent\" <b>&</b>\n\ttabs and émoji 🚀")
	user.Metadata = map[string]any{
		"string": "value",
		"number": float64(42),
		"frac":   -0.25,
		"bool":   true,
		"false":  false,
		"null":   nil,
		"nested": map[string]any{"list": []any{"a", float64(1), true, nil, map[string]any{"deep": "yes"}}, "empty": map[string]any{}},
		"list":   []any{},
	}
	return []agent.PersistentMessage{
		pm(agent.SystemText("You are a careful assistant.", agent.SystemReplace), identityS),
		pm(agent.SystemText("Prefer small diffs.", agent.SystemAppend), identityS),
		pm(user, identityA),
		pm(assistant, identityA),
		pm(results, identityA),
		pm(agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("Fixed.")}, Usage: &agent.Usage{OutputTokens: 3}, StopReason: "end_turn"}, identityA),
		// An answer cut off by the token limit, and one with a reason no
		// wire sends yet: both kept as the wire said them.
		pm(agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("The long answer, cut o")}, StopReason: "length"}, identityB),
		pm(agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("?")}, StopReason: "a_future_reason"}, identityB),
		// A message with no content at all still round-trips.
		pm(agent.Message{Role: agent.RoleAssistant}, identityA),
	}
}

func testRoundTrip(t *testing.T, h Harness) {
	s := h.New(t)
	id := "roundtrip-" + agent.NewSessionID()
	msgs := RoundTripMessages()
	// Two batches, so that a store's batch boundaries are crossed too.
	appendOK(t, s, id, msgs[:3])
	appendOK(t, s, id, msgs[3:])
	conv := loadOK(t, s, id)
	if len(conv.Messages) != len(msgs) {
		t.Fatalf("Load returned %d messages, want %d", len(conv.Messages), len(msgs))
	}
	for i, want := range msgs {
		if diff := diffMessage(want.Message, conv.Messages[i]); diff != "" {
			t.Errorf("message %d: %s", i, diff)
		}
	}
}

// diffMessage compares a message with its round-tripped self: JSON inputs
// compare by value (a store may re-encode them), and empty and nil
// slices and maps are the same.
func diffMessage(want, got agent.Message) string {
	var diffs []string
	if want.Role != got.Role {
		diffs = append(diffs, fmt.Sprintf("role %q, want %q", got.Role, want.Role))
	}
	if want.StopReason != got.StopReason {
		diffs = append(diffs, fmt.Sprintf("stop reason %q, want %q", got.StopReason, want.StopReason))
	}
	if len(want.Content) != len(got.Content) {
		diffs = append(diffs, fmt.Sprintf("%d blocks, want %d", len(got.Content), len(want.Content)))
	} else {
		for i := range want.Content {
			w, g := want.Content[i], got.Content[i]
			if !jsonEqual(w.Input, g.Input) {
				diffs = append(diffs, fmt.Sprintf("block %d input %s, want %s", i, g.Input, w.Input))
			}
			w.Input, g.Input = nil, nil
			if !reflect.DeepEqual(w, g) {
				diffs = append(diffs, fmt.Sprintf("block %d = %+v, want %+v", i, g, w))
			}
		}
	}
	switch {
	case (want.Usage == nil) != (got.Usage == nil):
		diffs = append(diffs, fmt.Sprintf("usage %v, want %v", got.Usage, want.Usage))
	case want.Usage != nil && *want.Usage != *got.Usage:
		diffs = append(diffs, fmt.Sprintf("usage %+v, want %+v", *got.Usage, *want.Usage))
	}
	if len(want.Metadata) != 0 || len(got.Metadata) != 0 {
		if !reflect.DeepEqual(normalize(want.Metadata), normalize(got.Metadata)) {
			diffs = append(diffs, fmt.Sprintf("metadata %#v, want %#v", got.Metadata, want.Metadata))
		}
	}
	return strings.Join(diffs, "; ")
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// normalize maps empty maps and slices to one form, since JSON stores
// may or may not drop an empty container.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	default:
		return v
	}
}

// checkResolveFails checks that Resolve(query) failed with want, naming
// each of names (the candidates of an ambiguous prefix).
func checkResolveFails(t *testing.T, query string, sess *agent.Session, err, want error, names []string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("Resolve(%q) = %v, %v; want error %v", query, sess, err, want)
		return
	}
	for _, name := range names {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("Resolve(%q) error %q does not name candidate %s", query, err, name)
		}
	}
}

// checkResolved checks that Resolve(query) returned session want, with
// its summary and a handle that loads its wantCount messages.
func checkResolved(t *testing.T, query string, sess *agent.Session, err error, want string, wantCount int) {
	t.Helper()
	switch {
	case err != nil:
		t.Errorf("Resolve(%q): %v", query, err)
		return
	case sess.Info.ID != want:
		t.Errorf("Resolve(%q) = %s, want %s", query, sess.Info.ID, want)
		return
	case sess.Store == nil:
		t.Errorf("Resolve(%q) returned a session with no Store", query)
		return
	}
	if sess.Info.MessageCount != wantCount || sess.Info.Modified.IsZero() {
		t.Errorf("Resolve(%q).Info = %+v, want MessageCount %d and Modified set", query, sess.Info, wantCount)
	}
	conv, err := sess.Load(t.Context())
	if err != nil {
		t.Errorf("Resolve(%q).Load: %v", query, err)
	} else if len(conv.Messages) != wantCount {
		t.Errorf("Resolve(%q).Load: %d messages, want %d", query, len(conv.Messages), wantCount)
	}
}

// identityCase is a session whose messages (each appended as its own
// batch) leave the summary with identity want.
type identityCase struct {
	name string
	msgs []agent.PersistentMessage
	want agent.WireIdentity
}

// identityCases: the last non-system message's endpoint is the session's.
func identityCases() []identityCase {
	return []identityCase{
		{
			name: "last-non-system-wins",
			msgs: []agent.PersistentMessage{
				pm(agent.SystemText("sys", agent.SystemReplace), identityS),
				pm(agent.UserText("hi"), identityA),
				pm(agent.AssistantText("hello"), identityB),
				pm(agent.SystemText("more sys", agent.SystemAppend), identityS),
			},
			want: identityB,
		},
		{
			name: "system-only-has-none",
			msgs: []agent.PersistentMessage{
				pm(agent.SystemText("sys", agent.SystemReplace), identityS),
				pm(agent.SystemText("sys 2", agent.SystemAppend), identityS),
			},
			want: agent.WireIdentity{},
		},
		{
			name: "switch-provider-mid-session",
			msgs: []agent.PersistentMessage{
				pm(agent.UserText("q1"), identityB),
				pm(agent.AssistantText("a1"), identityB),
				pm(agent.UserText("q2"), identityA),
				pm(agent.SystemText("later sys", agent.SystemAppend), identityS),
			},
			want: identityA,
		},
	}
}

func testIdentity(t *testing.T, h Harness) {
	s := h.New(t)
	cases := identityCases()
	for _, c := range cases {
		id := "identity-" + c.name
		// One message per batch: the identity must survive batch
		// boundaries and summaries kept across appends.
		for _, m := range c.msgs {
			appendOK(t, s, id, []agent.PersistentMessage{m})
		}
	}
	for _, c := range cases {
		id := "identity-" + c.name
		check := func(from string, info agent.SessionInfo) {
			got := agent.WireIdentity{APIStyle: info.APIStyle, BaseURL: info.BaseURL, Model: info.Model, Reasoning: info.Reasoning}
			if got != c.want {
				t.Errorf("%s: %s info identity %+v, want %+v", c.name, from, got, c.want)
			}
			if info.MessageCount != len(c.msgs) {
				t.Errorf("%s: %s MessageCount %d, want %d", c.name, from, info.MessageCount, len(c.msgs))
			}
		}
		check("List", infoOf(t, s, id))
		sess, err := s.Resolve(t.Context(), id)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", id, err)
		}
		check("Resolve", sess.Info)
	}
}

// secret is a marker that stands for key material: it is only ever in
// provenance, which a store must not keep.
const secret = "sk-test-SECRET"

func testNoKeyMaterial(t *testing.T, h Harness) {
	s := h.New(t)
	id := "nokey-" + agent.NewSessionID()
	provenance := []agent.Message{
		agent.SystemText("Authorization: Bearer "+secret, agent.SystemAppend),
		agent.UserText("my key is " + secret),
		{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("ok")}, Metadata: map[string]any{"api_key": secret}},
	}
	msgs := []agent.PersistentMessage{
		{
			Message:        agent.UserText("a harmless question"),
			Identity:       identityA,
			Conversation:   provenance,
			ToolsAvailable: []agent.ToolDecl{{Name: "bash", Description: "key " + secret, InputSchema: map[string]any{"default": secret}}},
		},
		{
			Message:      agent.AssistantText("a harmless answer"),
			Identity:     identityA,
			Conversation: provenance,
		},
	}
	appendOK(t, s, id, msgs)
	conv := loadOK(t, s, id)
	sameTexts(t, "Load", conv, msgs)
	dump, err := json.Marshal(conv)
	if err != nil {
		t.Fatalf("marshal loaded conversation: %v", err)
	}
	if bytes.Contains(dump, []byte(secret)) {
		t.Errorf("Load returned provenance (key material): %s", dump)
	}
	info := infoOf(t, s, id)
	if dump, _ := json.Marshal(info); bytes.Contains(dump, []byte(secret)) {
		t.Errorf("List returned key material: %s", dump)
	}
}

func testListOrder(t *testing.T, h Harness) {
	s := h.New(t)
	long := appendInOrder(t, s)
	infos := listOK(t, s)
	if got, want := listIDs(infos), []string{"order-c", "order-a", "order-b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List order %v, want %v (newest first by Modified)", got, want)
	}
	for i := 1; i < len(infos); i++ {
		if infos[i].Modified.After(infos[i-1].Modified) {
			t.Errorf("List[%d].Modified %v is after List[%d].Modified %v", i, infos[i].Modified, i-1, infos[i-1].Modified)
		}
	}
	checkOrderSummaries(t, infos, long)
	a, c := infos[1], infos[0]
	if !a.Modified.After(a.Created) {
		t.Errorf("order-a: Modified %v not after Created %v although appended twice", a.Modified, a.Created)
	}
	if !c.Modified.After(infoOf(t, s, "order-b").Modified) {
		t.Errorf("order-c Modified %v not after order-b's", c.Modified)
	}
}

// appendInOrder writes sessions order-a, order-b and order-c, then
// appends to a and c again, so that List's order is c, a, b. It returns
// order-b's one message, longer than MaxLastUserMessage.
func appendInOrder(t *testing.T, s agent.SessionStore) string {
	// Stores stamp modification times themselves; a short pause between
	// appends makes the order unambiguous even with a coarse clock.
	pause := func() { time.Sleep(15 * time.Millisecond) }
	long := strings.Repeat("long question ", 40) // over MaxLastUserMessage runes
	toolResult := agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("t1", "tool output", false)}}
	summary := agent.UserText("Summary of the conversation so far")
	summary.Metadata = map[string]any{agent.MetadataCompaction: true}

	appendOK(t, s, "order-a", []agent.PersistentMessage{pm(agent.UserText("question a"), identityA), pm(agent.AssistantText("answer a"), identityA)})
	pause()
	appendOK(t, s, "order-b", []agent.PersistentMessage{pm(agent.UserText(long), identityA)})
	pause()
	appendOK(t, s, "order-c", []agent.PersistentMessage{pm(agent.UserText("question c"), identityA)})
	pause()
	// Touching a makes it the newest; a tool result and a compaction
	// summary are not something a person typed.
	appendOK(t, s, "order-a", []agent.PersistentMessage{
		pm(agent.UserText("second question a"), identityA),
		pm(agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.ToolUseBlock("t1", "ls", json.RawMessage(`{}`))}}, identityA),
		pm(toolResult, identityA),
	})
	pause()
	appendOK(t, s, "order-c", []agent.PersistentMessage{pm(summary, identityA), pm(agent.SystemText("sys", agent.SystemAppend), identityS)})
	return long
}

// checkOrderSummaries checks the summaries List gives of appendInOrder's
// sessions: message counts, the last message a person typed, times.
func checkOrderSummaries(t *testing.T, infos []agent.SessionInfo, long string) {
	t.Helper()
	want := map[string]struct {
		count int
		last  string
	}{
		"order-a": {5, "second question a"},
		"order-b": {1, long},
		"order-c": {3, "question c"},
	}
	for _, info := range infos {
		w := want[info.ID]
		if info.MessageCount != w.count {
			t.Errorf("%s: MessageCount %d, want %d", info.ID, info.MessageCount, w.count)
		}
		if info.LastUserMessage != w.last && info.LastUserMessage != agent.Truncate(w.last, agent.MaxLastUserMessage) {
			t.Errorf("%s: LastUserMessage %q, want %q (or its truncation)", info.ID, info.LastUserMessage, w.last)
		}
		if info.Created.After(info.Modified) {
			t.Errorf("%s: Created %v after Modified %v", info.ID, info.Created, info.Modified)
		}
	}
}

func testResolve(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	ids := []string{"abc123-one", "abc123-two", "abd999", "xyz", "xyz-longer"}
	for i, id := range ids {
		appendOK(t, s, id, texts(id, i+1))
	}
	cases := []struct {
		query string
		want  string // the id resolved, or ""
		err   error
		names []string // candidates the error must name
	}{
		{query: "abc123-one", want: "abc123-one"},
		{query: "abc123-t", want: "abc123-two"},
		{query: "abd", want: "abd999"},
		{query: "xyz", want: "xyz"}, // a full id wins over the longer ids it prefixes
		{query: "xyz-", want: "xyz-longer"},
		{query: "abc", err: agent.ErrAmbiguousSessionID, names: []string{"abc123-one", "abc123-two"}},
		{query: "ab", err: agent.ErrAmbiguousSessionID, names: []string{"abc123-one", "abc123-two", "abd999"}},
		{query: "abc123-three", err: agent.ErrSessionNotFound},
		{query: "q", err: agent.ErrSessionNotFound},
		{query: "ABC", err: agent.ErrSessionNotFound}, // ids are case-sensitive
	}
	for _, c := range cases {
		sess, err := s.Resolve(ctx, c.query)
		if c.err != nil {
			checkResolveFails(t, c.query, sess, err, c.err, c.names)
			continue
		}
		wantCount := 0
		for i, id := range ids {
			if id == c.want {
				wantCount = i + 1
			}
		}
		checkResolved(t, c.query, sess, err, c.want, wantCount)
	}
	_, err := s.Load(ctx, "abc123")
	wantErr(t, "Load of a prefix (Load takes full ids only)", err, agent.ErrSessionNotFound)
}

// invalidIDs are ids that must never reach a file system or a key.
var invalidIDs = []string{"../x", "..", "a/b", "/abs", `a\b`, "a.b", "", " ", "a b", "id\n", "é", strings.Repeat("a", agent.MaxSessionIDLen+1)}

func testInvalidIDs(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	for _, id := range invalidIDs {
		_, err := s.Resolve(ctx, id)
		wantErr(t, fmt.Sprintf("Resolve(%q)", id), err, agent.ErrInvalidSessionID)
		_, err = s.Load(ctx, id)
		wantErr(t, fmt.Sprintf("Load(%q)", id), err, agent.ErrInvalidSessionID)
		err = s.AppendMessages(ctx, id, texts("invalid", 1))
		wantErr(t, fmt.Sprintf("AppendMessages(%q)", id), err, agent.ErrInvalidSessionID)
	}
	if infos := listOK(t, s); len(infos) != 0 {
		t.Errorf("List after appends to invalid ids = %v, want nothing", listIDs(infos))
	}
	// The longest valid id is accepted.
	if !h.Discards {
		long := strings.Repeat("L", agent.MaxSessionIDLen)
		appendOK(t, s, long, texts("long", 1))
		sameTexts(t, "Load of the longest id", loadOK(t, s, long), texts("long", 1))
	}
}

func testLatest(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	_, err := s.Latest(ctx)
	wantErr(t, "Latest of an empty store", err, agent.ErrSessionNotFound)
	for _, id := range []string{"latest-1", "latest-2", "latest-1"} {
		time.Sleep(15 * time.Millisecond)
		appendOK(t, s, id, texts(id, 1))
		sess, err := s.Latest(ctx)
		if err != nil {
			t.Fatalf("Latest: %v", err)
		}
		if sess.Info.ID != id {
			t.Fatalf("Latest = %s, want %s", sess.Info.ID, id)
		}
		if sess.Store == nil {
			t.Fatal("Latest returned a session with no Store")
		}
	}
	sess, _ := s.Latest(ctx)
	if sess.Info.MessageCount != 2 {
		t.Errorf("Latest().Info.MessageCount = %d, want 2", sess.Info.MessageCount)
	}
}

// batchKey names one batch of the concurrency test: writer w's batch b.
type batchKey struct{ writer, batch int }

func testConcurrentAppenders(t *testing.T, h Harness) {
	const (
		writersPerHandle = 3
		batchesPerWriter = 4
	)
	s := h.New(t)
	handles := []agent.SessionStore{s}
	if h.Reopen != nil {
		// Several independent handles, as several processes would append.
		handles = append(handles, h.Reopen(t, s), h.Reopen(t, s))
	}
	id := "concurrent-" + agent.NewSessionID()
	batchSize := func(b int) int { return 2 + b%2 }

	errs := make(chan error, len(handles)*writersPerHandle*batchesPerWriter+1)
	stopReader := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		loadWhileAppending(t, s, id, batchSize, stopReader, errs)
	}()
	writers := appendConcurrently(t, handles, id, writersPerHandle, batchesPerWriter, batchSize, errs)
	close(stopReader)
	<-readerDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	total := 0
	for b := range batchesPerWriter {
		total += batchSize(b)
	}
	total *= writers
	for _, hs := range handles {
		h.settle(t, hs)
	}
	for i, hs := range handles {
		conv := loadOK(t, hs, id)
		if len(conv.Messages) != total {
			t.Errorf("handle %d: Load returned %d messages, want %d", i, len(conv.Messages), total)
		}
		if err := checkBatches(conv, batchSize, writers, batchesPerWriter); err != nil {
			t.Errorf("handle %d: %v", i, err)
		}
		if info := infoOf(t, hs, id); info.MessageCount != total {
			t.Errorf("handle %d: List MessageCount %d, want %d", i, info.MessageCount, total)
		}
	}
	if t.Failed() {
		return
	}
	checkWriterOrder(t, loadOK(t, s, id))
}

// loadWhileAppending loads session id until stop is closed, while the
// writers append: every batch it sees must be whole. It sends what goes
// wrong to errs.
func loadWhileAppending(t *testing.T, s agent.SessionStore, id string, batchSize func(int) int, stop <-chan struct{}, errs chan<- error) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		conv, err := s.Load(t.Context(), id)
		if errors.Is(err, agent.ErrSessionNotFound) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			errs <- fmt.Errorf("concurrent Load: %w", err)
			return
		}
		if err := checkBatches(conv, batchSize, 0, 0); err != nil {
			errs <- fmt.Errorf("concurrent Load saw a partial batch: %w", err)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// appendConcurrently runs writersPerHandle writers on each handle, each
// appending batchesPerWriter batches to session id (batch b of writer w
// holds batchSize(b) messages "w<w> b<b> m<k>/<n>"), and waits for them.
// It sends what goes wrong to errs and returns the number of writers.
func appendConcurrently(t *testing.T, handles []agent.SessionStore, id string, writersPerHandle, batchesPerWriter int, batchSize func(int) int, errs chan<- error) int {
	var wg sync.WaitGroup
	writer := 0
	for _, hs := range handles {
		for range writersPerHandle {
			wg.Add(1)
			go func(hs agent.SessionStore, w int) {
				defer wg.Done()
				for b := range batchesPerWriter {
					n := batchSize(b)
					batch := make([]agent.PersistentMessage, n)
					for k := range batch {
						batch[k] = pm(agent.UserText(fmt.Sprintf("w%d b%d m%d/%d", w, b, k, n)), identityA)
					}
					if err := hs.AppendMessages(t.Context(), id, batch); err != nil {
						errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
						return
					}
				}
			}(hs, writer)
			writer++
		}
	}
	wg.Wait()
	return writer
}

// checkWriterOrder checks that each writer's batches (as
// appendConcurrently writes them) are stored in its own order.
func checkWriterOrder(t *testing.T, conv *agent.Conversation) {
	t.Helper()
	last := map[int]int{}
	for _, m := range conv.Messages {
		var w, b, k, n int
		fmt.Sscanf(m.Text(), "w%d b%d m%d/%d", &w, &b, &k, &n)
		if k != 0 {
			continue
		}
		if prev, ok := last[w]; ok && b <= prev {
			t.Errorf("writer %d: batch %d stored after batch %d", w, b, prev)
		}
		last[w] = b
	}
}

// checkBatches checks that conv is a sequence of whole batches of the
// concurrency test, each at most once; when writers > 0, also that each
// of the writers has all its batches there.
func checkBatches(conv *agent.Conversation, batchSize func(int) int, writers, batches int) error {
	seen := map[batchKey]bool{}
	msgs := conv.Messages
	for i := 0; i < len(msgs); {
		var w, b, k, n int
		if _, err := fmt.Sscanf(msgs[i].Text(), "w%d b%d m%d/%d", &w, &b, &k, &n); err != nil {
			return fmt.Errorf("message %d %q is not one of the test's: %v", i, msgs[i].Text(), err)
		}
		if k != 0 || n != batchSize(b) {
			return fmt.Errorf("message %d %q does not start a batch", i, msgs[i].Text())
		}
		key := batchKey{w, b}
		if seen[key] {
			return fmt.Errorf("batch %d of writer %d stored twice", b, w)
		}
		seen[key] = true
		for j := range n {
			if i+j >= len(msgs) {
				return fmt.Errorf("batch %d of writer %d is cut short after %d of %d messages", b, w, j, n)
			}
			want := fmt.Sprintf("w%d b%d m%d/%d", w, b, j, n)
			if got := msgs[i+j].Text(); got != want {
				return fmt.Errorf("message %d is %q, want %q: batches interleaved", i+j, got, want)
			}
		}
		i += n
	}
	for w := range writers {
		for b := range batches {
			if !seen[batchKey{w, b}] {
				return fmt.Errorf("batch %d of writer %d is missing", b, w)
			}
		}
	}
	return nil
}

func testReopen(t *testing.T, h Harness) {
	s1 := h.New(t)
	s2 := h.Reopen(t, s1)
	ctx := t.Context()
	// Listing through both handles first lets a store build whatever
	// summaries it keeps; they must not hide what the other handle writes.
	listOK(t, s1)
	listOK(t, s2)

	first := texts("one", 2)
	appendOK(t, s1, "reopen-a", first)
	sameTexts(t, "Load through the second handle", loadOK(t, s2, "reopen-a"), first)
	if info := infoOf(t, s2, "reopen-a"); info.MessageCount != 2 {
		t.Errorf("second handle: MessageCount %d, want 2", info.MessageCount)
	}
	time.Sleep(15 * time.Millisecond)
	more := []agent.PersistentMessage{pm(agent.UserText("from the second handle"), identityB)}
	appendOK(t, s2, "reopen-a", more)
	all := append(append([]agent.PersistentMessage{}, first...), more...)
	sameTexts(t, "Load through the first handle", loadOK(t, s1, "reopen-a"), all)
	if info := infoOf(t, s2, "reopen-a"); info.MessageCount != 3 {
		t.Errorf("second handle after its own append: MessageCount %d, want 3", info.MessageCount)
	}
	h.settle(t, s2)
	info := infoOf(t, s1, "reopen-a")
	if info.MessageCount != 3 || info.LastUserMessage != "from the second handle" || info.Model != identityB.Model {
		t.Errorf("first handle info after the second appended: %+v", info)
	}
	time.Sleep(15 * time.Millisecond)
	appendOK(t, s2, "reopen-b", texts("two", 1))
	h.settle(t, s2)
	for i, hs := range []agent.SessionStore{s1, s2} {
		if got, want := listIDs(listOK(t, hs)), []string{"reopen-b", "reopen-a"}; !reflect.DeepEqual(got, want) {
			t.Errorf("handle %d: List %v, want %v", i+1, got, want)
		}
		sess, err := hs.Latest(ctx)
		if err != nil || sess.Info.ID != "reopen-b" {
			t.Errorf("handle %d: Latest = %v, %v; want reopen-b", i+1, sess, err)
		}
		sess, err = hs.Resolve(ctx, "reopen-a")
		if err != nil || sess.Info.MessageCount != 3 {
			t.Errorf("handle %d: Resolve(reopen-a) = %+v, %v; want 3 messages", i+1, sess, err)
		}
	}
}

// testTitleAndUsage: the summary a store lists (List, Resolve, and
// another handle's List) holds the latest title and the token totals of
// every entry, as agent.SessionInfo.Update folds them, across batches.
func testTitleAndUsage(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	id := "titled-" + agent.NewSessionID()
	msgs := RoundTripMessages()
	appendOK(t, s, id, msgs[:4])
	appendOK(t, s, id, []agent.PersistentMessage{pm(agent.TitleMessage("first title"), identityS)})
	appendOK(t, s, id, msgs[4:])
	appendOK(t, s, id, []agent.PersistentMessage{pm(agent.TitleMessage("The \"latest\" title ✓"), identityS)})
	var want agent.SessionInfo
	for _, m := range msgs {
		want.Update(m)
	}
	if want.Usage == (agent.Usage{}) {
		t.Fatal("the round-trip messages hold no usage")
	}
	check := func(from string, info agent.SessionInfo) {
		t.Helper()
		if info.Title != "The \"latest\" title ✓" || info.Usage != want.Usage || info.MessageCount != len(msgs)+2 {
			t.Errorf("%s: title %q, usage %+v, %d messages; want the latest title, usage %+v, %d messages", from, info.Title, info.Usage, info.MessageCount, want.Usage, len(msgs)+2)
		}
	}
	check("List", infoOf(t, s, id))
	sess, err := s.Resolve(ctx, id)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", id, err)
	}
	check("Resolve", sess.Info)
	conv := loadOK(t, s, id)
	if title, ok := conv.Messages[4].Title(); !ok || title != "first title" {
		t.Errorf("Load: message 5 is %+v, want the first title entry", conv.Messages[4])
	}
	if h.Reopen != nil {
		h.settle(t, s)
		check("List of another handle", infoOf(t, h.Reopen(t, s), id))
	}
	// A title can be cleared.
	appendOK(t, s, id, []agent.PersistentMessage{pm(agent.TitleMessage(""), identityS)})
	if info := infoOf(t, s, id); info.Title != "" {
		t.Errorf("after a title was cleared: title %q", info.Title)
	}
}

// testProject: a store that records projects (agent.ProjectRecorder)
// lists a session with the project its first append recorded (List,
// Resolve, Latest and another handle), ignores the project a later
// append gives, and lists a session appended without one with none.
func testProject(t *testing.T, h Harness) {
	s := h.New(t)
	pr, ok := s.(agent.ProjectRecorder)
	if !ok {
		t.Skip("the store does not record projects")
	}
	ctx := t.Context()
	project := agent.Project{Remote: "host.test/team/proj", Root: "/src/proj", Path: "cmd/x", Dir: "/src/proj/cmd/x"}
	sess := s.Create()
	sess.Info.Project = project
	if err := sess.Append(ctx, texts("first", 2)); err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := pr.AppendMessagesIn(ctx, agent.Project{Dir: "/elsewhere"}, sess.Info.ID, texts("later", 1)); err != nil {
		t.Fatalf("append in another project: %v", err)
	}
	plain := "plain-" + agent.NewSessionID()
	appendOK(t, s, plain, texts("no project", 1))
	check := func(from string, info agent.SessionInfo, want agent.Project) {
		t.Helper()
		if info.Project != want {
			t.Errorf("%s: project %+v, want %+v", from, info.Project, want)
		}
	}
	check("List", infoOf(t, s, sess.Info.ID), project)
	check("List of a session without one", infoOf(t, s, plain), agent.Project{})
	got, err := s.Resolve(ctx, sess.Info.ID)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	check("Resolve", got.Info, project)
	if h.Reopen != nil {
		h.settle(t, s)
		check("List of another handle", infoOf(t, h.Reopen(t, s), sess.Info.ID), project)
	}
}
