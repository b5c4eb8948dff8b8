package agent

import (
	"encoding/json"
	"strings"
)

// Role says who produced a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// SystemMode says how a system message combines with the system prompt
// that is in force before it.
type SystemMode string

const (
	// SystemAppend adds the text to the system prompt in force.
	SystemAppend SystemMode = "append"
	// SystemReplace discards the system prompt in force and starts anew.
	SystemReplace SystemMode = "replace"
)

// BlockType names the kind of a content block.
type BlockType string

const (
	BlockText             BlockType = "text"              // Text
	BlockThinking         BlockType = "thinking"          // Text, Signature
	BlockRedactedThinking BlockType = "redacted_thinking" // Data
	BlockToolUse          BlockType = "tool_use"          // ToolUseID, ToolName, Input
	BlockToolResult       BlockType = "tool_result"       // ToolUseID, Text, IsError
	BlockSystem           BlockType = "system"            // Text, Mode
)

// Block is one piece of a message's content. It is a tagged union: Type
// says which of the other fields are meaningful (see the BlockType
// constants). A single flat struct keeps the JSON line format obvious and
// lets every store round-trip blocks without a registry of kinds.
type Block struct {
	Type BlockType `json:"type"`
	// Text is the text of a text, thinking, system or tool result block.
	Text string `json:"text,omitempty"`
	// Signature is the provider's opaque signature of a thinking block,
	// which some providers require to be sent back verbatim.
	Signature string `json:"signature,omitempty"`
	// ToolUseID links a tool result to the tool use it answers.
	ToolUseID string `json:"tool_use_id,omitempty"`
	// ToolName is the tool a tool use block calls.
	ToolName string `json:"name,omitempty"`
	// Input is the JSON arguments of a tool use block.
	Input json.RawMessage `json:"input,omitempty"`
	// IsError marks a tool result that reports a failure.
	IsError bool `json:"is_error,omitempty"`
	// Mode is how a system block combines with the prompt before it.
	Mode SystemMode `json:"mode,omitempty"`
	// Data is the opaque, encrypted content of a redacted thinking block:
	// the provider wants it back verbatim and no one can read it.
	Data string `json:"data,omitempty"`
}

// TextBlock returns a text block.
func TextBlock(text string) Block { return Block{Type: BlockText, Text: text} }

// ToolUseBlock returns a block that calls tool name with input.
func ToolUseBlock(id, name string, input json.RawMessage) Block {
	return Block{Type: BlockToolUse, ToolUseID: id, ToolName: name, Input: input}
}

// ToolResultBlock returns the result of the tool use with the given id.
func ToolResultBlock(toolUseID, text string, isError bool) Block {
	return Block{Type: BlockToolResult, ToolUseID: toolUseID, Text: text, IsError: isError}
}

// Usage counts the tokens a provider billed for one assistant message.
type Usage struct {
	InputTokens      int64 `json:"input_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
}

// Add adds the counts of v to u.
func (u *Usage) Add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheReadTokens += v.CacheReadTokens
	u.CacheWriteTokens += v.CacheWriteTokens
	u.ReasoningTokens += v.ReasoningTokens
}

// Message is one entry of a conversation.
type Message struct {
	Role    Role
	Content []Block
	Usage   *Usage
	// StopReason is why the provider ended an assistant message, as its
	// wire said it; empty when it said nothing (and on older entries).
	StopReason StopReason
	// Metadata is free-form data that round-trips through every store.
	// Values come back as encoding/json decodes them (numbers as float64).
	Metadata map[string]any
}

// UserText returns a user message holding text.
func UserText(text string) Message {
	return Message{Role: RoleUser, Content: []Block{TextBlock(text)}}
}

// AssistantText returns an assistant message holding text.
func AssistantText(text string) Message {
	return Message{Role: RoleAssistant, Content: []Block{TextBlock(text)}}
}

// SystemText returns a system message that appends to or replaces the
// system prompt in force.
func SystemText(text string, mode SystemMode) Message {
	if mode == "" {
		mode = SystemAppend
	}
	return Message{Role: RoleSystem, Content: []Block{{Type: BlockSystem, Text: text, Mode: mode}}}
}

// Text returns the message's text, system and (for user messages) tool
// result blocks joined by newlines; thinking (redacted or not) and tool
// use are left out.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Content {
		switch b.Type {
		case BlockText, BlockSystem:
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolUses returns the tool use blocks of the message.
func (m Message) ToolUses() []Block {
	var uses []Block
	for _, b := range m.Content {
		if b.Type == BlockToolUse {
			uses = append(uses, b)
		}
	}
	return uses
}

// IsToolResult reports whether the message carries tool results (the
// reply to an assistant's tool calls) rather than something a person typed.
func (m Message) IsToolResult() bool {
	for _, b := range m.Content {
		if b.Type == BlockToolResult {
			return true
		}
	}
	return false
}

// IsCompactionSummary reports whether the message is the summary a
// compaction wrote, which resets the context a provider sees.
func (m Message) IsCompactionSummary() bool {
	v, _ := m.Metadata[MetadataCompaction].(bool)
	return v
}

// MetadataCompaction is the metadata key that marks a compaction summary.
const MetadataCompaction = "panto.compaction"

// MetadataInterrupted is the metadata key of an assistant message the
// step stopped in (Ctrl-C, a broken stream): its value says why
// ("cancelled", else the error), and the message holds the text that
// had streamed, no thinking and no tool call. It has no stop reason.
const MetadataInterrupted = "panto.interrupted"

// Interrupted returns why an answer was stopped in, and false for one
// that ended as its provider ended it.
func (m Message) Interrupted() (string, bool) {
	why, ok := m.Metadata[MetadataInterrupted].(string)
	return why, ok && m.Role == RoleAssistant
}

// MetadataTitle is the metadata key of a title entry (see TitleMessage).
const MetadataTitle = "panto.title"

// TitleMessage returns a title entry: a system message with no content
// whose metadata holds the session's title. The latest one in a session
// is its title (SessionInfo.Title); an empty title clears it.
//
// A title is an entry of the log rather than a field kept beside it, so
// that it syncs, merges and forks with the messages. It is a system
// message with no content so that every panto reads it, those that
// predate titles included: a system message without blocks adds nothing
// to the system prompt, and system messages are never sent as context.
func TitleMessage(title string) Message {
	return Message{Role: RoleSystem, Content: []Block{}, Metadata: map[string]any{MetadataTitle: title}}
}

// Title returns the title a title entry sets, and false for any other
// message.
func (m Message) Title() (string, bool) {
	if m.Role != RoleSystem {
		return "", false
	}
	title, ok := m.Metadata[MetadataTitle].(string)
	return title, ok
}
