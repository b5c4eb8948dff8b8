package agent

import "strings"

// Conversation is one linear chain of messages, oldest first.
type Conversation struct{ Messages []Message }

// SystemPrompt folds the conversation's system messages, in order, into
// the system prompt in force at its end: an append adds a paragraph, a
// replace starts over.
func (c *Conversation) SystemPrompt() string {
	var parts []string
	for _, m := range c.Messages {
		if m.Role != RoleSystem {
			continue
		}
		for _, b := range m.Content {
			if b.Type != BlockSystem && b.Type != BlockText {
				continue
			}
			if b.Mode == SystemReplace {
				parts = parts[:0]
			}
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Context returns the messages a provider should see: the non-system
// messages from the latest compaction summary onward (or all of them when
// there was no compaction). System messages are sent separately, through
// SystemPrompt.
func (c *Conversation) Context() []Message {
	start := 0
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].IsCompactionSummary() {
			start = i
			break
		}
	}
	var out []Message
	for _, m := range c.Messages[start:] {
		if m.Role != RoleSystem {
			out = append(out, m)
		}
	}
	return out
}

// LatestCompaction returns the index of the latest compaction summary, or
// -1 when there is none.
func (c *Conversation) LatestCompaction() int {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].IsCompactionSummary() {
			return i
		}
	}
	return -1
}
