// Package null is the store for embedders who opt out of persistence
// (panto --no-session, store spec "none"): appends succeed and keep
// nothing, so an Agent runs exactly as with a real store but leaves no
// trace. Reads behave like an empty store: List is empty and Resolve,
// Latest and Load report ErrSessionNotFound.
package null

import (
	"context"
	"fmt"

	"github.com/panto-dev/panto/agent"
)

// Store keeps nothing. The zero value is ready to use; it is safe for
// concurrent use because it has no state.
type Store struct{}

// New returns a store that discards every append.
func New() *Store { return &Store{} }

var _ agent.SessionStore = (*Store)(nil)

// Create mints a handle on a session that will never be stored.
func (s *Store) Create() *agent.Session {
	return &agent.Session{Info: agent.SessionInfo{ID: agent.NewSessionID()}, Store: s}
}

// List returns no sessions.
func (s *Store) List(ctx context.Context) ([]agent.SessionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, nil
}

// Resolve finds nothing: every valid id or prefix is ErrSessionNotFound.
func (s *Store) Resolve(ctx context.Context, idOrPrefix string) (*agent.Session, error) {
	if err := agent.ValidateSessionID(idOrPrefix); err != nil {
		return nil, fmt.Errorf("resolve session: %w", err)
	}
	return nil, agent.NotFoundError(idOrPrefix)
}

// Latest is always ErrSessionNotFound.
func (s *Store) Latest(ctx context.Context) (*agent.Session, error) {
	return nil, fmt.Errorf("latest session: %w (the null store keeps none)", agent.ErrSessionNotFound)
}

// Load is always ErrSessionNotFound (or ErrInvalidSessionID).
func (s *Store) Load(ctx context.Context, id string) (*agent.Conversation, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	return nil, fmt.Errorf("load session: %w", agent.NotFoundError(id))
}

// AppendMessages discards msgs. It still refuses an invalid id, so that a
// caller's bug shows up the same way with every store.
func (s *Store) AppendMessages(ctx context.Context, sessionID string, msgs []agent.PersistentMessage) error {
	if err := agent.ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("append to session: %w", err)
	}
	return ctx.Err()
}
