package agent_test

import (
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
)

// TestUpdateFoldsTitleAndUsage: the latest title entry is the title (an
// empty one clears it), usage is summed with the write record's Usage
// taking precedence over the message's (as the line encoder does), and a
// title entry changes neither the system prompt nor the context.
func TestUpdateFoldsTitleAndUsage(t *testing.T) {
	tests := []struct {
		name     string
		msgs     []agent.PersistentMessage
		title    string
		usage    agent.Usage
		lastUser string
	}{
		{
			name: "latest title wins",
			msgs: []agent.PersistentMessage{
				{Message: agent.UserText("hello")},
				{Message: agent.TitleMessage("first")},
				{Message: agent.TitleMessage("second")},
			},
			title: "second", lastUser: "hello",
		},
		{
			name: "an empty title clears it",
			msgs: []agent.PersistentMessage{
				{Message: agent.TitleMessage("first")},
				{Message: agent.TitleMessage("")},
			},
		},
		{
			name: "title metadata on a user message is no title",
			msgs: []agent.PersistentMessage{
				{Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.TextBlock("x")}, Metadata: map[string]any{agent.MetadataTitle: "no"}}},
			},
			lastUser: "x",
		},
		{
			name: "a long title is truncated",
			msgs: []agent.PersistentMessage{
				{Message: agent.TitleMessage(strings.Repeat("é", agent.MaxTitle+5))},
			},
			title: strings.Repeat("é", agent.MaxTitle-1) + "…",
		},
		{
			name: "usage sums, the record's first",
			msgs: []agent.PersistentMessage{
				{Message: agent.Message{Role: agent.RoleAssistant, Usage: &agent.Usage{InputTokens: 1000}}, Usage: &agent.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5}},
				{Message: agent.Message{Role: agent.RoleAssistant, Usage: &agent.Usage{InputTokens: 1, OutputTokens: 1, CacheReadTokens: 1, CacheWriteTokens: 1, ReasoningTokens: 1}}},
				{Message: agent.UserText("no usage")},
			},
			usage:    agent.Usage{InputTokens: 11, OutputTokens: 3, CacheReadTokens: 4, CacheWriteTokens: 5, ReasoningTokens: 6},
			lastUser: "no usage",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var info agent.SessionInfo
			for _, pm := range tt.msgs {
				info.Update(pm)
			}
			if info.Title != tt.title || info.Usage != tt.usage || info.LastUserMessage != tt.lastUser || info.MessageCount != len(tt.msgs) {
				t.Errorf("info %+v; want title %q, usage %+v, last user %q, %d messages", info, tt.title, tt.usage, tt.lastUser, len(tt.msgs))
			}
		})
	}

	conv := &agent.Conversation{Messages: []agent.Message{
		agent.SystemText("be terse", agent.SystemReplace), agent.TitleMessage("t"), agent.UserText("q"),
	}}
	if got := conv.SystemPrompt(); got != "be terse" {
		t.Errorf("system prompt with a title entry: %q", got)
	}
	if ctx := conv.Context(); len(ctx) != 1 || ctx[0].Text() != "q" {
		t.Errorf("context with a title entry: %+v", ctx)
	}
	if _, ok := agent.SystemText("x", agent.SystemAppend).Title(); ok {
		t.Error("a system prompt is taken for a title entry")
	}
}
