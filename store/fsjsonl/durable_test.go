package fsjsonl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// syncCall is one call of a Store's batch sync, with what the summary
// cache held when it was made.
type syncCall struct {
	files []string
	cache []byte // nil: no cache file
}

// recordSyncs makes s's batch sync record its calls, failing those for
// which fail returns true.
func recordSyncs(t *testing.T, s *fsjsonl.Store, fail func(n int) bool) *[]syncCall {
	t.Helper()
	var calls []syncCall
	fsjsonl.SetSyncBatch(s, func(_ context.Context, dir string, files []string) error {
		cache, _ := os.ReadFile(filepath.Join(dir, fsjsonl.IndexFile))
		calls = append(calls, syncCall{files: slices.Clone(files), cache: cache})
		if fail(len(calls)) {
			return errDiskGone
		}
		return nil
	})
	return &calls
}

var errDiskGone = errors.New("disk gone")

// TestDeferredSync: a Store that defers its syncs (panto-sync pull)
// makes what it wrote durable in one sync of the batch at Flush, of
// every file written since the last one, before the summary cache
// records any of it; a sync that fails fails the Flush, leaves the cache
// as it was, and is made again, of the same files, by the next Flush. A
// Store that does not defer never syncs in a batch (each write is
// fsynced as it is made).
func TestDeferredSync(t *testing.T) {
	ctx := context.Background()
	a, b := agent.NewSessionID(), agent.NewSessionID()
	dataA, dataB := encode(t, a, true, batch("a", 2), t0), encode(t, b, true, batch("b", 2), t0)
	moreB := encode(t, b, false, batch("b2", 2), t0)

	t.Run("deferred", func(t *testing.T) {
		dir := t.TempDir()
		s, err := fsjsonl.Open(dir, fsjsonl.WithDeferredSync())
		if err != nil {
			t.Fatal(err)
		}
		calls := recordSyncs(t, s, func(n int) bool { return n == 1 })
		atA, err := s.AppendLog(ctx, a, store.Checkpoint{}, dataA)
		if err != nil {
			t.Fatal(err)
		}
		atB, err := s.AppendLog(ctx, b, store.Checkpoint{}, dataB)
		if err != nil {
			t.Fatal(err)
		}
		if len(*calls) != 0 {
			t.Fatalf("synced before the Flush: %v", *calls)
		}
		both := []string{filepath.Join(dir, a+fsjsonl.Ext), filepath.Join(dir, b+fsjsonl.Ext)}
		slices.Sort(both)

		if err := s.Flush(ctx); !errors.Is(err, errDiskGone) {
			t.Fatalf("Flush whose sync failed: %v, want the sync's error", err)
		}
		if _, err := os.Stat(filepath.Join(dir, fsjsonl.IndexFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the summary cache was saved though the sync failed: %v", err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		cache, err := os.ReadFile(filepath.Join(dir, fsjsonl.IndexFile))
		if err != nil {
			t.Fatalf("no summary cache after the Flush: %v", err)
		}
		if len(*calls) != 2 || !slices.Equal((*calls)[0].files, both) || !slices.Equal((*calls)[1].files, both) {
			t.Fatalf("syncs %v, want two of %v (the failed one, then again)", *calls, both)
		}
		if (*calls)[1].cache != nil {
			t.Fatal("the summary cache was saved before the sync")
		}

		if err := s.Flush(ctx); err != nil || len(*calls) != 2 {
			t.Fatalf("a Flush with nothing written: %v, %d syncs, want none more", err, len(*calls))
		}
		if _, err := s.AppendLog(ctx, b, atB, moreB); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		last := (*calls)[len(*calls)-1]
		if len(*calls) != 3 || !slices.Equal(last.files, []string{filepath.Join(dir, b+fsjsonl.Ext)}) {
			t.Fatalf("syncs %v, want a third of %s alone", *calls, b)
		}
		if string(last.cache) != string(cache) {
			t.Fatal("the summary cache recorded the append before the sync")
		}
		if cp, err := store.Head(ctx, s, a); err != nil || cp != atA {
			t.Fatalf("session %s after the Flushes: %v, %v, want %v", a, cp, err, atA)
		}
	})

	t.Run("immediate", func(t *testing.T) {
		dir := t.TempDir()
		s, err := fsjsonl.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		calls := recordSyncs(t, s, func(int) bool { return false })
		if _, err := s.AppendLog(ctx, a, store.Checkpoint{}, dataA); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil || len(*calls) != 0 {
			t.Fatalf("Flush: %v, syncs %v, want none", err, *calls)
		}
	})

	t.Run("the file system's sync", func(t *testing.T) {
		dir := t.TempDir()
		s, err := fsjsonl.Open(dir, fsjsonl.WithDeferredSync())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendLog(ctx, a, store.Checkpoint{}, dataA); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
