package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

func segmentKeys(t *testing.T, e *env, id string) []string {
	t.Helper()
	var keys []string
	for _, o := range e.rawBucket(t) {
		if strings.HasPrefix(o.key, "pfx/sessions/"+id+"/seg/") {
			keys = append(keys, strings.TrimPrefix(o.key, "pfx/sessions/"+id+"/"))
		}
	}
	return keys
}

func readManifest(t testing.TB, e *env, id string) *manifest.Manifest {
	t.Helper()
	for _, o := range e.readBucket(t) {
		if o.key == "pfx/sessions/"+id+"/manifest.json" {
			m, err := manifest.Decode(o.data)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no manifest for %s", id)
	return nil
}

// TestCompaction: past the threshold an append merges the segments into
// one object under a new name; the old ones stay for the grace period and
// are deleted by a later compaction; the bytes never change.
func TestCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	const grace = 1500 * time.Millisecond
	s := e.open(t, objstore.WithCompactThreshold(4), objstore.WithCompactGrace(grace), objstore.WithManifestInterval(1))
	id := agent.NewSessionID()
	for i := 0; i < 4; i++ {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := readRaw(ctx, s, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(readManifest(t, e, id).Segments); got != 4 {
		t.Fatalf("%d segments before the threshold", got)
	}
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("m4")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil { // the compaction runs after the checkpoint
		t.Fatal(err)
	}
	m := readManifest(t, e, id)
	if len(m.Segments) != 1 || !m.Segments[0].Merged || len(m.Pending) != 4 { // seg/0 stays
		t.Fatalf("after compaction: %+v pending %+v", m.Segments, m.Pending)
	}
	if keys := segmentKeys(t, e, id); len(keys) != 6 || keys[0] != manifest.MergedName(0, m.Length) && keys[5] != manifest.MergedName(0, m.Length) {
		t.Fatalf("objects %q (old ones kept for the grace period)", keys)
	}
	raw, err := readRaw(ctx, e.open(t), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	m4 := readManifest(t, e, id)
	if string(raw[:len(before)]) != string(before) || int64(len(raw)) != m4.Length {
		t.Fatal("compaction changed the bytes")
	}
	cps, err := s.Checkpoints(ctx, id)
	if err != nil || len(cps) != 1 || cps[0].Length != m4.Length || cps[0].SHA256 != m4.SHA256 {
		t.Fatalf("checkpoints %v %+v", err, cps)
	}
	// Within the grace period a compaction keeps the replaced objects.
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("m5")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	if keys := segmentKeys(t, e, id); len(keys) != 8 {
		t.Fatalf("objects within the grace period: %q", keys)
	}
	// After it, another store's compaction deletes them: a store whose
	// clock is past the grace period.
	later := e.open(t)
	objstore.SetNow(later, func() time.Time { return time.Now().Add(grace + 100*time.Millisecond) })
	if err := later.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	m = readManifest(t, e, id)
	keys := segmentKeys(t, e, id)
	if len(keys) != 2 || !slices.Contains(keys, m.Segments[0].Name()) || !slices.Contains(keys, manifest.SegmentName(0)) || len(m.Pending) != 0 {
		t.Fatalf("after the grace period: objects %q manifest %+v pending %+v", keys, m.Segments, m.Pending)
	}
	// The first segment marks the session as existing: creating it again
	// through the no-read path of a new session is refused, not a write
	// nobody would ever read.
	head, err := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{user("again")}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := appendRaw(ctx, e.open(t), id, 0, "", head); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("re-creating a compacted session: %v", err)
	}
	conv, err := e.open(t).Load(ctx, id)
	if err != nil || len(conv.Messages) != 6 {
		t.Fatalf("load after compaction: %v", err)
	}
	if err := e.open(t).Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, agent.NewSessionID()); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("compact of a missing session: %v", err)
	}
}

// TestStaleSegmentIgnored: a segment name below the manifest's end,
// re-created after compaction deleted it (a stalled writer), is never read.
func TestStaleSegmentIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t, objstore.WithCompactThreshold(0), objstore.WithCompactGrace(0))
	id := agent.NewSessionID()
	for i := 0; i < 3; i++ {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, e, id)
	stale := manifest.SegmentName(m.Segments[0].Length / 2) // some old position
	codec, _ := manifest.NewCodec()
	junk := codec.Compress([]byte("{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"STALE\"}]}\n"))
	e.putRaw(t, e.key("sessions/"+id+"/"+stale), junk)
	conv, err := e.open(t).Load(ctx, id)
	if err != nil || strings.Contains(strings.Join(texts(conv), ","), "STALE") || len(conv.Messages) != 3 {
		t.Fatalf("load: %v %q", err, texts(conv))
	}
}

// TestReadLogEntrySaysNoManifest: a reader whose index entry says no
// manifest is stored probes from seg/0; when the bucket holds a manifest
// after all, over merged segments whose originals are gone (an entry
// written before a compaction, say), the probe runs short of the entry
// and the reader reads the manifest instead: the log reads whole.
func TestReadLogEntrySaysNoManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t, objstore.WithCompactThreshold(3), objstore.WithCompactGrace(0), objstore.WithManifestInterval(1), partitionsAtClose())
	id := idIn("7")
	var want []string
	for i := 0; i < 6; i++ {
		want = append(want, fmt.Sprint("m", i))
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(want[i])}); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A second compaction deletes what the first one replaced.
	if err := s.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	plain := 0
	for _, k := range segmentKeys(t, e, id) {
		if !strings.Contains(k, "-") {
			plain++
		}
	}
	if plain >= 6 {
		t.Fatalf("no original segment was deleted: a probe from seg/0 would read them all")
	}
	if err := s.Close(ctx); err != nil { // folds the entry into its partition
		t.Fatal(err)
	}
	// Rewrite the partition's entry to say no manifest is stored.
	codec, _ := manifest.NewCodec()
	key := partitionKey(id)
	sh, err := codec.DecodeIndexShard(key, codec.CompressSmaller(e.object(t, key)))
	if err != nil {
		t.Fatal(err)
	}
	entry := sh.Sessions[id]
	if entry.Resume.Segments == 0 {
		t.Fatalf("the entry has no resume state: %+v", entry)
	}
	entry.Resume.Stored = 0
	sh.Sessions[id] = entry
	data, err := codec.EncodeIndexShard(key, sh)
	if err != nil {
		t.Fatal(err)
	}
	e.putRaw(t, key, data)
	fb := e.faults(t)
	r := e.openOn(t, fb)
	if _, err := r.List(ctx); err != nil {
		t.Fatal(err)
	}
	fb.Take()
	conv, err := r.Load(ctx, id)
	if err != nil || strings.Join(texts(conv), ",") != strings.Join(want, ",") {
		t.Fatalf("load: %v %q", err, texts(conv))
	}
	ops := fb.Take()
	probedFirst := slices.ContainsFunc(ops, func(o objstore.Op) bool { return strings.HasSuffix(o.Key, "/"+manifest.SegmentName(0)) })
	readManifest := slices.ContainsFunc(ops, func(o objstore.Op) bool { return strings.HasSuffix(o.Key, "/manifest.json") })
	if !probedFirst || !readManifest {
		t.Errorf("the load probed seg/0: %v, read the manifest: %v; want both (the probe, then the fallback)", probedFirst, readManifest)
	}
}
