package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// APIStyle names a provider wire protocol.
type APIStyle string

const (
	APIStyleOpenAIChat        APIStyle = "openai-chat"
	APIStyleAnthropicMessages APIStyle = "anthropic-messages"
)

// ReasoningEffort is the reasoning level requested of a provider; empty
// means the provider's default.
type ReasoningEffort string

const (
	ReasoningDefault ReasoningEffort = ""
	ReasoningLow     ReasoningEffort = "low"
	ReasoningMedium  ReasoningEffort = "medium"
	ReasoningHigh    ReasoningEffort = "high"
)

// WireIdentity is the ground truth of which endpoint a turn went to: the
// protocol, the base URL and model as sent on the wire, and the reasoning
// level that disambiguates otherwise identical endpoints. It never holds
// key material.
type WireIdentity struct {
	APIStyle  APIStyle
	BaseURL   string
	Model     string
	Reasoning ReasoningEffort
}

// ToolDecl describes a tool offered to the provider.
type ToolDecl struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema map[string]any
}

// PersistentMessage is the write record: everything the agent knows about
// a message as it enters the conversation. The write side is rich so that
// a store may keep what it wants (an audit store may keep the provenance);
// the read side (Load) is a plain Conversation.
type PersistentMessage struct {
	Message Message
	Usage   *Usage
	// Identity is the endpoint of the turn this message belongs to.
	Identity WireIdentity
	// Conversation is provenance: the whole conversation at write time.
	Conversation []Message
	// ToolsAvailable is provenance: the tools offered for this turn.
	ToolsAvailable []ToolDecl
}

// SessionInfo is what list and selection show about a session.
type SessionInfo struct {
	ID                string
	Created, Modified time.Time
	MessageCount      int
	// LastUserMessage is the text of the latest message a person typed;
	// stores may truncate it (see MaxLastUserMessage).
	LastUserMessage string
	// The wire identity of the latest non-system entry.
	APIStyle  APIStyle
	BaseURL   string
	Model     string
	Reasoning ReasoningEffort
	// Title is the text of the latest title entry (see TitleMessage);
	// empty when there is none, or when the latest one cleared it.
	// Stores may truncate it (see MaxTitle).
	Title string
	// Parent is the session this one was copied from, as its log's header
	// says: by a fork, which starts with the parent's first ForkedAt
	// messages, or by sync's keep-both, which copies the whole log
	// (ForkedAt 0). Empty for a session that was started afresh.
	Parent   string
	ForkedAt int
	// Usage is the sum of the token usage of every entry.
	Usage Usage
	// Project is where the session was started, as its log's header
	// records it; the zero Project for a session that predates projects.
	Project Project
}

// Project is where a session was started (internal/project finds it):
// the working directory, and inside a git work tree the repository's
// identity. The JSON tags are the line format's (a log's header).
type Project struct {
	// Remote is the work tree's origin remote, normalised (host/path:
	// no scheme, user, password, port or ".git"), the same for every
	// clone of the repository; empty outside git or without an origin.
	Remote string `json:"remote,omitempty"`
	// Root is the work tree's root directory (empty outside git), Path
	// the working directory inside it, slash-separated ("" at the root).
	Root string `json:"root,omitempty"`
	Path string `json:"path,omitempty"`
	// Dir is the working directory.
	Dir string `json:"dir,omitempty"`
}

// Key is what makes two sessions one project: the remote when there is
// one (a clone at another path, or on another machine, is the same
// project), else the work tree's root, else the directory; "" for no
// project. A normalised remote never begins with "/", so a remote and a
// directory never share a key.
func (p Project) Key() string {
	switch {
	case p.Remote != "":
		return p.Remote
	case p.Root != "":
		return p.Root
	}
	return p.Dir
}

// OnlyDir reports whether p knows only its directory (a session imported
// from another agent's log, which records the working directory alone).
func (p Project) OnlyDir() bool { return p.Remote == "" && p.Root == "" && p.Dir != "" }

// Holds reports whether a session started in project s belongs to p: the
// same Key, or, for a session that knows only its directory, a
// directory inside p's work tree. No project belongs to none.
func (p Project) Holds(s Project) bool {
	if s.Key() != "" && s.Key() == p.Key() {
		return true
	}
	return s.OnlyDir() && p.Root != "" && within(s.Dir, p.Root)
}

// within reports whether path dir is root or below it.
func within(dir, root string) bool {
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// ProjectRecorder is a SessionStore whose logs record the project a
// session was started in. Session.Append uses it, so that a session made
// by Create, its Info.Project set, records it with its first batch.
type ProjectRecorder interface {
	// AppendMessagesIn is AppendMessages that, when the append creates
	// the session, records project in its header. An append to an
	// existing session ignores project.
	AppendMessagesIn(ctx context.Context, project Project, sessionID string, msgs []PersistentMessage) error
}

// MaxLastUserMessage is the number of runes of SessionInfo.LastUserMessage
// a store keeps.
const MaxLastUserMessage = 200

// MaxTitle is the number of runes of SessionInfo.Title a store keeps.
const MaxTitle = 200

// SessionStore persists sessions. Implementations must be safe for
// concurrent use by multiple goroutines.
type SessionStore interface {
	// Create mints a handle on a new session with a fresh random id. It does
	// no I/O: the session comes into existence with its first append.
	Create() *Session
	// List returns every session, newest first by Modified. When part of
	// the store's catalog cannot be read, it returns the sessions it could
	// list with an error wrapping ErrIncompleteList.
	List(ctx context.Context) ([]SessionInfo, error)
	// Resolve returns the session whose id is idOrPrefix, or the only one
	// whose id starts with it. It fails with ErrSessionNotFound when none
	// matches, ErrAmbiguousSessionID (naming the candidates) when several
	// do, and ErrInvalidSessionID when idOrPrefix is not a possible id.
	Resolve(ctx context.Context, idOrPrefix string) (*Session, error)
	// Latest returns the most recently modified session, or
	// ErrSessionNotFound when there is none.
	Latest(ctx context.Context) (*Session, error)
	// Load returns the session's messages in order, or ErrSessionNotFound.
	Load(ctx context.Context, id string) (*Conversation, error)
	// AppendMessages appends msgs to the session, creating it if needed.
	// The batch is atomic: a reader sees all of it or none of it, even
	// after a crash. Appending an empty batch does nothing.
	AppendMessages(ctx context.Context, sessionID string, msgs []PersistentMessage) error
}

// Session is a handle on one session of a store.
type Session struct {
	Info  SessionInfo
	Store SessionStore
}

// Load returns the session's conversation.
func (s *Session) Load(ctx context.Context) (*Conversation, error) {
	return s.Store.Load(ctx, s.Info.ID)
}

// Append appends a batch of messages to the session and keeps Info up to
// date with what was appended.
func (s *Session) Append(ctx context.Context, msgs []PersistentMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	var err error
	if pr, ok := s.Store.(ProjectRecorder); ok && s.Info.Project != (Project{}) {
		err = pr.AppendMessagesIn(ctx, s.Info.Project, s.Info.ID, msgs)
	} else {
		err = s.Store.AppendMessages(ctx, s.Info.ID, msgs)
	}
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if s.Info.Created.IsZero() {
		s.Info.Created = now
	}
	s.Info.Modified = now
	for _, pm := range msgs {
		s.Info.Update(pm)
	}
	return nil
}

// Update folds one appended entry into the info: the count, the last
// user message, the last wire identity, the latest title and the token
// totals. Stores use it to keep their summaries the same way.
func (info *SessionInfo) Update(pm PersistentMessage) {
	info.MessageCount++
	m := pm.Message
	if m.Role == RoleUser && !m.IsToolResult() && !m.IsCompactionSummary() {
		info.LastUserMessage = Truncate(m.Text(), MaxLastUserMessage)
	}
	if title, ok := m.Title(); ok {
		info.Title = Truncate(title, MaxTitle)
	}
	// The usage a store writes for the entry (see PersistentMessage).
	if u := pm.Usage; u != nil {
		info.Usage.Add(*u)
	} else if u := m.Usage; u != nil {
		info.Usage.Add(*u)
	}
	if m.Role != RoleSystem && pm.Identity != (WireIdentity{}) {
		info.APIStyle = pm.Identity.APIStyle
		info.BaseURL = pm.Identity.BaseURL
		info.Model = pm.Identity.Model
		info.Reasoning = pm.Identity.Reasoning
	}
}

// Truncate shortens s to at most n runes, marking a cut with an ellipsis.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var (
	// ErrSessionNotFound: no session has the id or prefix asked for.
	ErrSessionNotFound = errors.New("session not found")
	// ErrAmbiguousSessionID: a prefix matches more than one session.
	ErrAmbiguousSessionID = errors.New("ambiguous session id")
	// ErrSessionDeleted: the session was deleted (a *DeletedError says
	// when); errors.Is(err, ErrSessionNotFound) holds too.
	ErrSessionDeleted = errors.New("session deleted")
	// ErrIncompleteList: a List could not read part of the store's
	// catalog; the sessions it returns with this error are the rest. The
	// error says what is damaged and how to repair it.
	ErrIncompleteList = errors.New("the session list is incomplete")
	// ErrInvalidSessionID: the id has characters outside the id alphabet
	// (letters, digits, '-' and '_'), is empty, or is too long.
	ErrInvalidSessionID = errors.New("invalid session id")
)

// MaxSessionIDLen bounds an id so that it fits in a file name and an
// object key with room to spare.
const MaxSessionIDLen = 128

// ValidateSessionID checks that id (or an id prefix) can be used as a file
// name and an object key component: no separators, no dots (so no ".."),
// nothing outside [A-Za-z0-9_-].
func ValidateSessionID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidSessionID)
	}
	if len(id) > MaxSessionIDLen {
		return fmt.Errorf("%w: longer than %d characters", ErrInvalidSessionID, MaxSessionIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("%w: %q (use letters, digits, '-' and '_')", ErrInvalidSessionID, id)
		}
	}
	return nil
}

// NewSessionID returns a fresh random id: 32 lowercase hex digits. Ids are
// random rather than time-ordered so that prefixes spread evenly (over
// index shards) and short prefixes resolve uniquely.
func NewSessionID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// AmbiguousError builds the error for a prefix that matches several ids.
func AmbiguousError(prefix string, candidates []string) error {
	const shown = 10
	list := candidates
	more := ""
	if len(list) > shown {
		list = list[:shown]
		more = fmt.Sprintf(" and %d more", len(candidates)-shown)
	}
	return fmt.Errorf("%w: %q matches %d sessions (%v%s); give more characters", ErrAmbiguousSessionID, prefix, len(candidates), list, more)
}

// DeletedError is the error of a session that was deleted: it is not
// found, and it says when it went, and (when the store kept them) the
// committed length and sha256 of its log then, so that a caller can tell
// a copy written to after the deletion from one that was deleted.
type DeletedError struct {
	ID      string
	Deleted time.Time
	Length  int64
	SHA256  string
}

func (e *DeletedError) Error() string {
	return fmt.Sprintf("%v: %s was deleted on %s", ErrSessionDeleted, e.ID, e.Deleted.Local().Format("2006-01-02 15:04"))
}

// Is makes errors.Is true for ErrSessionDeleted and ErrSessionNotFound.
func (e *DeletedError) Is(target error) bool {
	return target == ErrSessionDeleted || target == ErrSessionNotFound
}

// NotFoundError builds the error for an id or prefix that matches nothing.
func NotFoundError(idOrPrefix string) error {
	return fmt.Errorf("%w: %q", ErrSessionNotFound, idOrPrefix)
}
