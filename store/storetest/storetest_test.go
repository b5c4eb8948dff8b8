package storetest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store/storetest"
)

// memStore is a minimal in-memory store on the shared line codec. It
// proves the suite can be passed; the real stores run it in their own
// packages.
type memStore struct {
	mu   *sync.Mutex
	logs map[string][]byte // shared between handles, as a backing store would be
}

func newMemStore() *memStore {
	return &memStore{mu: &sync.Mutex{}, logs: map[string][]byte{}}
}

func (s *memStore) Create() *agent.Session {
	return &agent.Session{Info: agent.SessionInfo{ID: agent.NewSessionID()}, Store: s}
}

func (s *memStore) List(ctx context.Context) ([]agent.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var infos []agent.SessionInfo
	for id, data := range s.logs {
		log, err := sessionlog.Parse(id, data)
		if err != nil {
			return nil, err
		}
		infos = append(infos, log.Info)
	}
	slices.SortFunc(infos, func(a, b agent.SessionInfo) int { return b.Modified.Compare(a.Modified) })
	return infos, nil
}

func (s *memStore) Resolve(ctx context.Context, prefix string) (*agent.Session, error) {
	if err := agent.ValidateSessionID(prefix); err != nil {
		return nil, err
	}
	infos, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var matches []string
	var found agent.SessionInfo
	for _, info := range infos {
		if info.ID == prefix {
			return &agent.Session{Info: info, Store: s}, nil
		}
		if strings.HasPrefix(info.ID, prefix) {
			matches = append(matches, info.ID)
			found = info
		}
	}
	switch len(matches) {
	case 0:
		return nil, agent.NotFoundError(prefix)
	case 1:
		return &agent.Session{Info: found, Store: s}, nil
	}
	return nil, agent.AmbiguousError(prefix, matches)
}

func (s *memStore) Latest(ctx context.Context) (*agent.Session, error) {
	infos, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, agent.ErrSessionNotFound
	}
	return &agent.Session{Info: infos[0], Store: s}, nil
}

func (s *memStore) Load(ctx context.Context, id string) (*agent.Conversation, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	log, err := sessionlog.Parse(id, s.logs[id])
	if err != nil {
		return nil, err
	}
	if log == nil {
		return nil, agent.NotFoundError(id)
	}
	return &agent.Conversation{Messages: log.Messages}, nil
}

func (s *memStore) AppendMessages(ctx context.Context, id string, msgs []agent.PersistentMessage) error {
	if err := agent.ValidateSessionID(id); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := sessionlog.EncodeBatch(id, len(s.logs[id]) == 0, msgs, time.Now())
	if err != nil {
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	s.logs[id] = append(s.logs[id], data...)
	return nil
}

func TestSuiteOnMemStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) agent.SessionStore { return newMemStore() },
		Reopen: func(t *testing.T, s agent.SessionStore) agent.SessionStore {
			m := s.(*memStore)
			return &memStore{mu: m.mu, logs: m.logs}
		},
	})
}
