package sessionlog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// parentProject is the project forkParent was started in.
var parentProject = agent.Project{Remote: "host.test/team/proj", Root: "/src/proj", Path: "cmd", Dir: "/src/proj/cmd"}

// forkParent is a log of 6 messages in three batches, the second an
// assistant's tool call with its results, each batch at its own time.
func forkParent(t *testing.T) []byte {
	t.Helper()
	identA := agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://a.test", Model: "model-a"}
	identB := agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "https://b.test/v1", Model: "model-b", Reasoning: agent.ReasoningLow}
	call := agent.Message{Role: agent.RoleAssistant, StopReason: "tool_use", Usage: &agent.Usage{InputTokens: 10, OutputTokens: 2},
		Content: []agent.Block{agent.ToolUseBlock("t1", "read_file", json.RawMessage(`{"path":"a"}`))}}
	result := agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("t1", "alpha", false)}}
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var log []byte
	for i, batch := range [][]agent.PersistentMessage{
		{{Message: agent.SystemText("sys", agent.SystemReplace)}, {Message: agent.UserText("read a"), Identity: identA}},
		{{Message: call, Identity: identA}, {Message: result, Identity: identA}},
		{{Message: agent.TitleMessage("parent title")}, {Message: agent.AssistantText("It says alpha."), Identity: identB}},
	} {
		b, err := sessionlog.EncodeBatchIn(parentProject, "parent", i == 0, batch, t0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, b...)
	}
	return log
}

func TestFork(t *testing.T) {
	parent := forkParent(t)
	whole, err := sessionlog.Parse("parent", parent)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []int{1, 2, 4, 5, 6, 0} {
		data, n, err := sessionlog.Fork(bytes.NewReader(parent), "parent", "child", at, created)
		if err != nil {
			t.Fatalf("at %d: %v", at, err)
		}
		want := at
		if at == 0 {
			want = len(whole.Messages)
		}
		fork, err := sessionlog.Parse("child", data)
		if err != nil || fork == nil {
			t.Fatalf("at %d: the fork does not parse: %v\n%s", at, err, data)
		}
		if n != want || len(fork.Messages) != want || fork.Committed != len(data) {
			t.Fatalf("at %d: %d messages (reported %d), %d of %d bytes committed", at, len(fork.Messages), n, fork.Committed, len(data))
		}
		// One batch: no line but the last ends it.
		if k, _ := sessionlog.CommittedLength("child", data[:len(data)-1]); k != 0 {
			t.Errorf("at %d: the fork is more than one batch (a batch ends at %d)", at, k)
		}
		if fork.Header.ID != "child" || fork.Header.ForkedFrom != "parent" || fork.Header.ForkedAt != want || !fork.Header.Created.Equal(created) {
			t.Errorf("at %d: header %+v", at, fork.Header)
		}
		if fork.Info.Parent != "parent" || fork.Info.ForkedAt != want || fork.Info.MessageCount != want || fork.Info.Project != parentProject {
			t.Errorf("at %d: info %+v", at, fork.Info)
		}
		for i := range fork.Messages {
			if a, b := canonical(t, whole.Messages[i]), canonical(t, fork.Messages[i]); a != b {
				t.Errorf("at %d: message %d changed:\n%s\n%s", at, i+1, a, b)
			}
		}
		// Each line keeps its time and endpoint: the fork's lines are
		// the parent's but for "more".
		pl, fl := bytes.Split(parent, []byte{'\n'}), bytes.Split(data, []byte{'\n'})
		for i := 1; i <= want; i++ {
			strip := func(l []byte) string {
				if s, _, ok := strings.Cut(string(l), `,"more":`); ok {
					return s
				}
				return strings.TrimSuffix(string(l), "}")
			}
			if strip(pl[i]) != strip(fl[i]) {
				t.Errorf("at %d: line %d\n%s\nbecame\n%s", at, i+1, pl[i], fl[i])
			}
		}
	}

	// A fork of the fork links to the fork.
	child, _, err := sessionlog.Fork(bytes.NewReader(parent), "parent", "child", 2, created)
	if err != nil {
		t.Fatal(err)
	}
	grand, _, err := sessionlog.Fork(bytes.NewReader(child), "child", "grandchild", 0, created)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := sessionlog.Parse("g", grand); g.Info.Parent != "child" || g.Info.ForkedAt != 2 {
		t.Errorf("fork of a fork: %+v", g.Info)
	}

	for _, tt := range []struct {
		at   int
		want string
	}{
		{3, "message 3 calls tools whose results are message 4; fork at 4"},
		{7, "the session holds 6 messages"},
		{-1, "1 or more"},
	} {
		_, _, err := sessionlog.Fork(bytes.NewReader(parent), "parent", "child", tt.at, created)
		if !errors.Is(err, sessionlog.ErrForkPoint) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("at %d: err %v, want ErrForkPoint saying %q", tt.at, err, tt.want)
		}
	}
	one, err := sessionlog.EncodeBatch("one", true, []agent.PersistentMessage{{Message: agent.UserText("hi")}}, created)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sessionlog.Fork(bytes.NewReader(one), "one", "child", 2, created); !errors.Is(err, sessionlog.ErrForkPoint) || !strings.HasSuffix(err.Error(), "the session holds 1 message") {
		t.Errorf("fork past a session of one message: %v", err)
	}
	if _, _, err := sessionlog.Fork(strings.NewReader("not a log\n"), "bad", "child", 0, created); !errors.Is(err, sessionlog.ErrMalformed) {
		t.Errorf("fork of a malformed log: %v", err)
	}
}
