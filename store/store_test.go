package store_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/null"
)

// able is a store with every optional ability of the vocabulary; it
// records which of its methods were called.
type able struct {
	*null.Store
	calls []string
}

func (a *able) called(m string) { a.calls = append(a.calls, m) }

func (a *able) Logs(ctx context.Context) ([]store.Log, error) {
	a.called("Logs")
	return nil, nil
}

func (a *able) ReadLog(ctx context.Context, id string, from int64) (io.ReadCloser, store.Checkpoint, error) {
	a.called("ReadLog")
	return io.NopCloser(strings.NewReader("")), store.Checkpoint{}, nil
}

func (a *able) AppendLog(ctx context.Context, id string, at store.Checkpoint, data []byte) (store.Checkpoint, error) {
	a.called("AppendLog")
	return store.Checkpoint{}, nil
}

func (a *able) Checkpoints(ctx context.Context, id string) ([]store.Checkpoint, error) {
	a.called("Checkpoints")
	return []store.Checkpoint{{Length: 3, SHA256: "abc"}}, nil
}

func (a *able) PrefixSHA256(ctx context.Context, id string, n int64) (string, error) {
	a.called("PrefixSHA256")
	return "def", nil
}

func (a *able) Verify(ctx context.Context, id string) error {
	a.called("Verify")
	return nil
}

func (a *able) Compact(ctx context.Context, id string) error {
	a.called("Compact")
	return nil
}

func (a *able) Flush(ctx context.Context) error {
	a.called("Flush")
	return nil
}

func (a *able) Close(ctx context.Context) error {
	a.called("Close")
	return nil
}

func (a *able) Delete(ctx context.Context, t store.Tombstone) error {
	a.called("Delete")
	return nil
}

func (a *able) Tombstones(ctx context.Context) ([]store.Tombstone, error) {
	a.called("Tombstones")
	return nil, nil
}

func (a *able) CheckIndex(ctx context.Context) (store.IndexReport, error) {
	a.called("CheckIndex")
	return store.IndexReport{}, nil
}

func (a *able) RepairIndex(ctx context.Context) (store.IndexReport, error) {
	a.called("RepairIndex")
	return store.IndexReport{}, nil
}

func (a *able) ChangeToken(ctx context.Context) (string, error) {
	a.called("ChangeToken")
	return "token", nil
}

var (
	_ store.LogStore      = (*able)(nil)
	_ store.Checkpointer  = (*able)(nil)
	_ store.PrefixHasher  = (*able)(nil)
	_ store.Verifier      = (*able)(nil)
	_ store.ChangeTokener = (*able)(nil)
	_ store.Compacter     = (*able)(nil)
	_ store.Flusher       = (*able)(nil)
	_ store.Closer        = (*able)(nil)
	_ store.Deleter       = (*able)(nil)
	_ store.IndexRepairer = (*able)(nil)
)

// flushOnly is a store whose one optional ability is Flush.
type flushOnly struct {
	*null.Store
	flushed bool
}

func (f *flushOnly) Flush(ctx context.Context) error {
	f.flushed = true
	return nil
}

// wrapper is the plainest store that wraps another: it has the methods of
// agent.SessionStore (promoted from the wrapped store) and none of the
// optional ones, which it can only offer through Unwrap.
type wrapper struct{ agent.SessionStore }

func (w wrapper) Unwrap() agent.SessionStore { return w.SessionStore }

// TestHelpersSeeThroughWrappers: every helper finds its interface on the
// store a wrapper wraps, through more than one wrapper.
func TestHelpersSeeThroughWrappers(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		helper string
		call   func(s agent.SessionStore, ls store.LogStore) error
		want   []string
	}{
		{"AsLogStore", func(s agent.SessionStore, ls store.LogStore) error {
			ls, ok := store.AsLogStore(s)
			if !ok {
				return errors.New("not a LogStore")
			}
			_, err := ls.Logs(ctx)
			return err
		}, []string{"Logs"}},
		{"PrefixCheckpoint", func(s agent.SessionStore, ls store.LogStore) error {
			_, err := store.PrefixCheckpoint(ctx, ls, "id", 5)
			return err
		}, []string{"PrefixSHA256"}},
		{"Head", func(s agent.SessionStore, ls store.LogStore) error {
			_, err := store.Head(ctx, ls, "id")
			return err
		}, []string{"Checkpoints"}},
		{"Checkpoints", func(s agent.SessionStore, ls store.LogStore) error {
			_, err := store.Checkpoints(ctx, s, "id")
			return err
		}, []string{"Checkpoints"}},
		{"Verify", func(s agent.SessionStore, ls store.LogStore) error {
			return store.Verify(ctx, ls, "id")
		}, []string{"Verify"}},
		{"Compact", func(s agent.SessionStore, ls store.LogStore) error {
			ok, err := store.Compact(ctx, s, "id")
			if !ok {
				return errors.New("Compact could not")
			}
			return err
		}, []string{"Compact"}},
		{"Flush", func(s agent.SessionStore, ls store.LogStore) error { return store.Flush(ctx, s) }, []string{"Flush"}},
		{"Close", func(s agent.SessionStore, ls store.LogStore) error { return store.Close(ctx, s) }, []string{"Close"}},
		{"CanDelete", func(s agent.SessionStore, ls store.LogStore) error {
			if !store.CanDelete(s) {
				return errors.New("CanDelete is false")
			}
			return nil
		}, nil},
		{"Delete", func(s agent.SessionStore, ls store.LogStore) error {
			return store.Delete(ctx, s, store.Tombstone{ID: "id"})
		}, []string{"Delete"}},
		{"Tombstones", func(s agent.SessionStore, ls store.LogStore) error {
			_, err := store.Tombstones(ctx, s)
			return err
		}, []string{"Tombstones"}},
		{"CheckIndex", func(s agent.SessionStore, ls store.LogStore) error {
			_, err := store.CheckIndex(ctx, s)
			return err
		}, []string{"CheckIndex"}},
		{"RepairIndex", func(s agent.SessionStore, ls store.LogStore) error {
			_, err := store.RepairIndex(ctx, s)
			return err
		}, []string{"RepairIndex"}},
		{"ChangeToken", func(s agent.SessionStore, ls store.LogStore) error {
			_, err := store.ChangeToken(ctx, s)
			return err
		}, []string{"ChangeToken"}},
	}
	for _, tt := range tests {
		t.Run(tt.helper, func(t *testing.T) {
			inner := &able{Store: null.New()}
			// The helpers of a LogStore get one whose raw-log methods are
			// the inner store's and whose abilities only Unwrap leads to.
			s := wrapper{wrapper{inner}}
			if err := tt.call(s, wrapperLog{inner.logStore(), s}); err != nil {
				t.Fatalf("through two wrappers: %v", err)
			}
			if !slices.Equal(inner.calls, tt.want) {
				t.Errorf("through two wrappers the wrapped store was called %v, want %v", inner.calls, tt.want)
			}
		})
	}
}

// logStore is a, seen only as a LogStore.
func (a *able) logStore() store.LogStore { return onlyLog{a} }

type onlyLog struct{ store.LogStore }

// wrapperLog is a LogStore that wraps another without saying so in its
// type: its raw-log methods are the wrapped LogStore's, its optional
// abilities only what Unwrap leads to.
type wrapperLog struct {
	store.LogStore
	wrapped agent.SessionStore
}

func (w wrapperLog) Unwrap() agent.SessionStore { return w.wrapped }

// TestHelpersWithoutTheAbility: a store (wrapped or not) without an
// optional interface gets each helper's fallback, or an error wrapping
// errors.ErrUnsupported where there is none.
func TestHelpersWithoutTheAbility(t *testing.T) {
	ctx := t.Context()
	for _, s := range []agent.SessionStore{null.New(), wrapper{null.New()}} {
		if _, ok := store.AsLogStore(s); ok {
			t.Errorf("%T: AsLogStore found a LogStore in the null store", s)
		}
		if store.CanDelete(s) {
			t.Errorf("%T: CanDelete is true of the null store", s)
		}
		if ts, err := store.Tombstones(ctx, s); err != nil || ts != nil {
			t.Errorf("%T: Tombstones = %v, %v; want none", s, ts, err)
		}
		if ok, err := store.Compact(ctx, s, "id"); ok || err != nil {
			t.Errorf("%T: Compact = %v, %v; want false, nil", s, ok, err)
		}
		if err := store.Close(ctx, s); err != nil {
			t.Errorf("%T: Close: %v", s, err)
		}
		unsupported := map[string]error{
			"Delete":      store.Delete(ctx, s, store.Tombstone{ID: "id"}),
			"Checkpoints": second(store.Checkpoints(ctx, s, "id")),
			"CheckIndex":  second(store.CheckIndex(ctx, s)),
			"RepairIndex": second(store.RepairIndex(ctx, s)),
			"ChangeToken": second(store.ChangeToken(ctx, s)),
		}
		for helper, err := range unsupported {
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%T: %s: %v, want errors.ErrUnsupported", s, helper, err)
			}
		}
	}
}

// TestCloseFlushesWithoutCloser: Close falls back to Flush, also through
// a wrapper.
func TestCloseFlushesWithoutCloser(t *testing.T) {
	inner := &flushOnly{Store: null.New()}
	if err := store.Close(t.Context(), wrapper{inner}); err != nil {
		t.Fatal(err)
	}
	if !inner.flushed {
		t.Error("Close of a store without Close did not flush it")
	}
}

func second[T any](_ T, err error) error { return err }

// TestCoversHeld: a tombstone covers what was deleted, no copy, and a
// shorter copy only when the deleting side held all of it; never a
// longer copy, nor one as long with other bytes.
func TestCoversHeld(t *testing.T) {
	deleted := store.Tombstone{ID: "s", At: store.Checkpoint{Length: 100, SHA256: "aa"}}
	for _, c := range []struct {
		name string
		cp   store.Checkpoint
		held bool
		want bool
	}{
		{"what was deleted", deleted.At, false, true},
		{"no copy", store.Checkpoint{}, false, true},
		{"shorter, held", store.Checkpoint{Length: 40, SHA256: "bb"}, true, true},
		{"shorter, not held", store.Checkpoint{Length: 40, SHA256: "bb"}, false, false},
		{"longer", store.Checkpoint{Length: 140, SHA256: "cc"}, true, false},
		{"as long, other bytes", store.Checkpoint{Length: 100, SHA256: "dd"}, true, false},
	} {
		if got := deleted.CoversHeld(c.cp, c.held); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
