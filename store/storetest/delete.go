package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// The deletion vocabulary of package store (store.Deleter), for the
// stores that have it: Run calls these when the Harness's store is one.

func runDeleter(t *testing.T, h Harness) {
	if !store.CanDelete(h.New(t)) {
		return
	}
	t.Run("Delete", func(t *testing.T) { testDelete(t, h) })
	t.Run("DeleteRefusesNewerCopies", func(t *testing.T) { testDeleteRefuses(t, h) })
	t.Run("DeleteUnknown", func(t *testing.T) { testDeleteUnknown(t, h) })
}

// deleter is a new store that speaks both vocabularies: a LogStore
// that deletes (store.Delete, store.Tombstones).
func deleter(t *testing.T, h Harness) store.LogStore {
	t.Helper()
	s, ok := store.AsLogStore(h.New(t))
	if !ok {
		t.Skip("a Deleter that is not a LogStore")
	}
	return s
}

// checkDeleted checks that session id (whose ids begin "delete-") is gone
// from every listing of s and that reads and appends say it was deleted;
// keep is the session left, the latest.
func checkDeleted(t *testing.T, s store.LogStore, id, keep string) {
	t.Helper()
	ctx := t.Context()
	if _, ok := logsByID(t, s)[id]; ok {
		t.Error("Logs lists a deleted session")
	}
	for _, info := range listOK(t, s) {
		if info.ID == id {
			t.Error("List lists a deleted session")
		}
	}
	if sess, err := s.Latest(ctx); err != nil || sess.Info.ID != keep {
		t.Errorf("Latest after the delete: %v, %v; want %s", sess, err, keep)
	}
	_, err := s.Load(ctx, id)
	deletedOK(t, "Load", err, id)
	_, err = s.Resolve(ctx, id)
	deletedOK(t, "Resolve of the full id", err, id)
	_, err = s.Resolve(ctx, id[:len("delete-")+6])
	deletedOK(t, "Resolve of a unique prefix", err, id)
	_, _, err = s.ReadLog(ctx, id, 0)
	deletedOK(t, "ReadLog", err, id)
	err = s.AppendMessages(ctx, id, texts("after", 1))
	deletedOK(t, "AppendMessages to a deleted session", err, id)
	_, err = s.AppendLog(ctx, id, store.Checkpoint{}, encodeBatch(t, id, true, "reborn"))
	if !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("AppendLog creating a deleted session: %v, want ErrSessionDeleted", err)
	}
}

func deletedOK(t *testing.T, what string, err error, id string) {
	t.Helper()
	var d *agent.DeletedError
	if !errors.Is(err, agent.ErrSessionDeleted) || !errors.Is(err, agent.ErrSessionNotFound) || !errors.As(err, &d) || d.ID != id || d.Deleted.IsZero() {
		t.Errorf("%s: %v, want an agent.DeletedError of %s (also ErrSessionNotFound)", what, err, id)
	}
}

func testDelete(t *testing.T, h Harness) {
	s := deleter(t, h)
	ctx := t.Context()
	id := "delete-" + agent.NewSessionID()
	keep := "keep-" + agent.NewSessionID()
	appendOK(t, s, id, texts("secret", 3))
	appendOK(t, s, id, texts("more secret", 2))
	appendOK(t, s, keep, texts("other", 2))
	h.settle(t, s)
	at := logsByID(t, s)[id].Checkpoint
	when := time.Now().UTC().Truncate(time.Second)
	if err := store.Delete(ctx, s, store.Tombstone{ID: id, Deleted: when, At: at}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	h.settle(t, s)
	checkDeleted(t, s, id, keep)
	tombs, err := store.Tombstones(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(tombs) != 1 || tombs[0].ID != id || tombs[0].At != at || !tombs[0].Deleted.Equal(when) {
		t.Errorf("Tombstones = %+v, want one of %s at %v deleted %v", tombs, id, at, when)
	}
	// Again: nothing changes.
	if err := store.Delete(ctx, s, store.Tombstone{ID: id, Deleted: when, At: at}); err != nil {
		t.Errorf("a second Delete: %v", err)
	}
	// The other session is untouched; a reopened handle sees the same.
	sameTexts(t, "the session kept", loadOK(t, s, keep), texts("other", 2))
	if h.Reopen != nil {
		other := h.Reopen(t, s)
		_, err := other.Load(ctx, id)
		deletedOK(t, "Load through another handle", err, id)
		if err := other.AppendMessages(ctx, id, texts("late", 1)); !errors.Is(err, agent.ErrSessionDeleted) {
			t.Errorf("an append through another handle: %v, want ErrSessionDeleted", err)
		}
	}
}

// testDeleteRefuses: a tombstone that does not cover the log (it was
// appended to after the deletion) deletes nothing; one of a longer log (a
// copy behind what was deleted) deletes it.
func testDeleteRefuses(t *testing.T, h Harness) {
	s := deleter(t, h)
	ctx := t.Context()
	id := "covered-" + agent.NewSessionID()
	first := encodeBatch(t, id, true, "one")
	second := encodeBatch(t, id, false, "two")
	at1, err := s.AppendLog(ctx, id, store.Checkpoint{}, first)
	if err != nil {
		t.Fatal(err)
	}
	at2, err := s.AppendLog(ctx, id, at1, second)
	if err != nil {
		t.Fatal(err)
	}
	var changed *store.ChangedError
	for _, tomb := range []store.Checkpoint{at1, {Length: at2.Length, SHA256: at1.SHA256}} {
		err := store.Delete(ctx, s, store.Tombstone{ID: id, Deleted: time.Now(), At: tomb})
		if !errors.As(err, &changed) || changed.Have != at2 {
			t.Errorf("Delete at %v of a log at %v: %v, want a ChangedError", tomb, at2, err)
		}
	}
	if raw, end := readLog(t, s, id, 0); end != at2 || !bytes.Equal(raw, append(append([]byte{}, first...), second...)) {
		t.Fatalf("a refused Delete changed the log: %v", end)
	}
	// A tombstone of a longer log covers this one (it is behind).
	longer := store.Checkpoint{Length: at2.Length + 100, SHA256: at2.SHA256}
	if err := store.Delete(ctx, s, store.Tombstone{ID: id, Deleted: time.Now(), At: longer}); err != nil {
		t.Fatalf("Delete of a copy behind the tombstone: %v", err)
	}
	_, err = s.Load(ctx, id)
	deletedOK(t, "Load", err, id)
}

// testDeleteUnknown: a tombstone for a session the store never held is
// kept, so that no copy of it can be written later.
func testDeleteUnknown(t *testing.T, h Harness) {
	s := deleter(t, h)
	ctx := t.Context()
	id := "unknown-" + agent.NewSessionID()
	tomb := store.Tombstone{ID: id, Deleted: time.Now().UTC().Truncate(time.Second), At: store.Checkpoint{Length: 123, SHA256: hexSHA([]byte("x"))}}
	if err := store.Delete(ctx, s, tomb); err != nil {
		t.Fatalf("Delete of a session the store does not hold: %v", err)
	}
	if _, err := s.AppendLog(ctx, id, store.Checkpoint{}, encodeBatch(t, id, true, "a copy")); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("AppendLog of a buried id: %v, want ErrSessionDeleted", err)
	}
	if err := s.AppendMessages(ctx, id, texts("a copy", 1)); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("AppendMessages of a buried id: %v, want ErrSessionDeleted", err)
	}
	tombs, err := store.Tombstones(ctx, s)
	if err != nil || len(tombs) != 1 || tombs[0].ID != id || tombs[0].At != tomb.At {
		t.Errorf("Tombstones = %+v, %v; want the one buried", tombs, err)
	}
	if infos := listOK(t, s); len(infos) != 0 {
		t.Errorf("List after a burial: %v", listIDs(infos))
	}
}
