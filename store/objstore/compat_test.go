package objstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

const (
	v2Fixture = "testdata/v2-bucket"
	v3Fixture = "testdata/v3-bucket"
)

// uploadFixture puts the objects of a fixture bucket under the env's
// prefix, with minio-go (or into the memory bucket).
func uploadFixture(t *testing.T, e *env, dir string) {
	t.Helper()
	root := filepath.Join(dir, "bucket")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		key := "pfx/" + filepath.ToSlash(rel)
		if e.mem != nil {
			e.putRaw(t, key, data)
			return nil
		}
		_, err = e.srv.Client(t).PutObject(context.Background(), e.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fixtureList is the List a fixture bucket's list.json records.
func fixtureList(t *testing.T, dir string) []agent.SessionInfo {
	t.Helper()
	var want []agent.SessionInfo
	data, err := os.ReadFile(filepath.Join(dir, "list.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestV2Bucket: a bucket written by main in format 2 lists, loads and
// reads back byte for byte, verifies, and takes appends, which are
// written in index format 4 (and upgrade the marker first).
func TestV2Bucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	uploadFixture(t, e, v2Fixture)
	want := fixtureList(t, v2Fixture)
	s := e.open(t)
	got, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List of the v2 bucket:\n got %+v\nwant %+v", got, want)
	}
	for _, info := range want {
		raw, err := os.ReadFile(filepath.Join(v2Fixture, "jsonl", info.ID+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		read, err := readRaw(ctx, s, info.ID, 0)
		if err != nil || !bytes.Equal(read, raw) {
			t.Fatalf("%s: ReadLog: %v, %d bytes, want the fixture's %d", info.ID, err, len(read), len(raw))
		}
		log, err := sessionlog.Parse("fixture", raw)
		if err != nil {
			t.Fatal(err)
		}
		conv, err := s.Load(ctx, info.ID)
		if err != nil || !reflect.DeepEqual(conv.Messages, log.Messages) {
			t.Fatalf("%s: Load: %v", info.ID, err)
		}
		if err := s.Verify(ctx, info.ID); err != nil {
			t.Fatalf("%s: Verify: %v", info.ID, err)
		}
	}
	// Nothing was written by reading: the marker is still version 1.
	if m := e.object(t, "pfx/panto-store.json"); !strings.Contains(string(m), `"version":1`) {
		t.Fatalf("reading upgraded the marker: %s", m)
	}

	// An append: the marker goes to 3 and requires index format 4, the
	// new documents are version 3, and everything still reads through a
	// fresh Store.
	id := "0a5e1f2b3c4d5e6f708192a3b4c5d6e7"
	w := e.open(t, objstore.WithManifestInterval(1))
	if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("after the upgrade")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := e.object(t, "pfx/panto-store.json"); string(m) != `{"format":"panto-objstore","version":3,"requires":["index-bases","index-log","index-heads","index-unfolded"]}` {
		t.Fatalf("marker after a write: %s", m)
	}
	if m := e.object(t, "pfx/sessions/"+id+"/manifest.json"); !strings.HasPrefix(string(m), `{"version":3,`) {
		t.Fatalf("manifest after a write: %.60s", m)
	}
	fresh := e.open(t)
	conv, err := fresh.Load(ctx, id)
	if err != nil || len(conv.Messages) != 41 || conv.Messages[40].Text() != "after the upgrade" {
		t.Fatalf("load after the append: %v", err)
	}
	if err := fresh.Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
	logs, err := sessionsOf(ctx, fresh)
	if err != nil || logs[id].Info.MessageCount != 41 || logs[id].Info.LastUserMessage != "after the upgrade" || len(logs) != 4 {
		t.Fatalf("list after the append: %v %+v (%d sessions)", err, logs[id].Info, len(logs))
	}
	// The compacted session (a v2 manifest with pending deletes) takes an
	// append and another compaction.
	c := "c0ffee00112233445566778899aabbcc"
	if err := fresh.AppendMessages(ctx, c, []agent.PersistentMessage{user("more")}); err != nil {
		t.Fatal(err)
	}
	// Format 2 summaries never folded token totals: the append folded
	// the whole log again rather than resume from the stale summary.
	if err := fresh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(v2Fixture, "jsonl", c+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := sessionlog.Parse("fixture", raw)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Info.Usage == (agent.Usage{}) {
		t.Fatalf("the fixture session %s has no usage to fold", c)
	}
	if logs, err := sessionsOf(ctx, e.open(t)); err != nil || logs[c].Info.Usage != parsed.Info.Usage || logs[c].Info.MessageCount != 11 {
		t.Fatalf("list after an append to a format 2 session: %v, usage %+v, want %+v", err, logs[c].Info.Usage, parsed.Info.Usage)
	}
	if err := fresh.Compact(ctx, c); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Decode(e.object(t, "pfx/sessions/"+c+"/manifest.json"))
	if err != nil || len(m.Segments) != 1 || len(m.Pending) == 0 {
		t.Fatalf("compacted manifest: %v, %+v", err, m)
	}
	if conv, err := e.open(t).Load(ctx, c); err != nil || len(conv.Messages) != 11 {
		t.Fatalf("load after compaction: %v", err)
	}
	if _, err := fresh.AppendLog(ctx, c, store.Checkpoint{}, []byte("x")); err == nil {
		t.Fatal("a malformed append was accepted")
	}
}

// TestV3Bucket: a bucket written by main in index format 3 (16 shard
// bases, a deleted session) lists, loads and reads back byte for byte,
// verifies, and is left as it was by reading. Its first write moves the
// index to format 4: the partitions hold every live session and the
// tombstone, a commit of the index log lists the sessions, and the marker
// requires index-log; then a fresh Store lists the same and the append,
// the first page of its listing agrees with List, the deleted session
// stays deleted, and the index checks clean.
func TestV3Bucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	uploadFixture(t, e, v3Fixture)
	want := fixtureList(t, v3Fixture)
	const deleted = "e1e2e3e4e5e6e7e8e9eaebecedeeeff0"
	// The Stores' clock runs from just after the fixture was written, so
	// that its tombstone is as young as it was then, whenever this runs.
	epoch, start := time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC), time.Now()
	open := func(opts ...objstore.Option) *objstore.Store {
		t.Helper()
		s := e.open(t, opts...)
		objstore.SetNow(s, func() time.Time { return epoch.Add(time.Since(start)) })
		return s
	}
	marker := string(e.object(t, "pfx/panto-store.json"))
	s := open()
	// Open writes its probe objects (panto-probe*.json), and nothing
	// else from here on.
	before := e.snapshot(t)
	got, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List of the v3 bucket:\n got %+v\nwant %+v", got, want)
	}
	if newest, err := s.ListNewest(ctx, 2, nil); err != nil || !reflect.DeepEqual(newest, want[:2]) {
		t.Fatalf("ListNewest of the v3 bucket: %v, %+v", err, newest)
	}
	if latest, err := s.Latest(ctx); err != nil || !reflect.DeepEqual(latest.Info, want[0]) {
		t.Fatalf("Latest of the v3 bucket: %v", err)
	}
	fixtureLogs := map[string][]byte{}
	for _, info := range want {
		raw, err := os.ReadFile(filepath.Join(v3Fixture, "jsonl", info.ID+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		fixtureLogs[info.ID] = raw
		read, err := readRaw(ctx, s, info.ID, 0)
		if err != nil || !bytes.Equal(read, raw) {
			t.Fatalf("%s: ReadLog: %v, %d bytes, want the fixture's %d", info.ID, err, len(read), len(raw))
		}
		log, err := sessionlog.Parse("fixture", raw)
		if err != nil {
			t.Fatal(err)
		}
		conv, err := s.Load(ctx, info.ID)
		if err != nil || !reflect.DeepEqual(conv.Messages, log.Messages) {
			t.Fatalf("%s: Load: %v", info.ID, err)
		}
		if err := s.Verify(ctx, info.ID); err != nil {
			t.Fatalf("%s: Verify: %v", info.ID, err)
		}
	}
	if _, err := s.Load(ctx, deleted); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Fatalf("Load of the deleted session: %v", err)
	}
	if report, err := s.CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("CheckIndex of the v3 bucket: %v, %+v", err, report)
	}
	// Nothing was written by reading (nor checking): not the marker,
	// nor anything else.
	if m := string(e.object(t, "pfx/panto-store.json")); m != marker {
		t.Fatalf("reading the v3 bucket changed the marker: %s", m)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("reading the v3 bucket wrote:\nbefore %s\nafter  %s", before, after)
	}

	// An append to a session of the fixture and a new session: the first
	// write moves the index to format 4.
	appended, added := "0b77aa00112233445566778899aabbcc", "5a5e0000111122223333444455556666"
	w := open(objstore.WithManifestInterval(1))
	if err := w.AppendMessages(ctx, appended, []agent.PersistentMessage{user("after the move")}); err != nil {
		t.Fatal(err)
	}
	if err := w.AppendMessages(ctx, added, []agent.PersistentMessage{user("a new session")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := string(e.object(t, "pfx/panto-store.json")); m != strings.TrimSuffix(marker, `]}`)+`,"index-log","index-heads","index-unfolded"]}` {
		t.Fatalf("marker after a write: %s (before: %s)", m, marker)
	}
	entries, tombs := e.indexed(t)
	for _, info := range append(slices.Clone(want), agent.SessionInfo{ID: added}) {
		if _, ok := entries[info.ID]; !ok {
			t.Errorf("%s is in no partition after the move", info.ID)
		}
	}
	if len(entries) != len(want)+1 {
		t.Errorf("the partitions hold %d sessions, want %d", len(entries), len(want)+1)
	}
	if _, ok := tombs[deleted]; !ok || len(tombs) != 1 {
		t.Errorf("the partitions hold the tombstones %v, want %s's", slices.Collect(maps.Keys(tombs)), deleted)
	}
	n, commit := e.newestCommit(t)
	if commit == nil || len(commit.Recent) != len(want)+1 || commit.Recent[deleted].Length != 0 {
		t.Fatalf("the newest index log commit (%d) after the move: %+v", n, commit)
	}

	fresh := open()
	got, err = fresh.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want)+1 {
		t.Fatalf("List after the move: %d sessions, want %d", len(got), len(want)+1)
	}
	listed := map[string]agent.SessionInfo{}
	for _, info := range got {
		listed[info.ID] = info
	}
	for _, info := range want {
		l := listed[info.ID]
		if info.ID == appended {
			if l.MessageCount != info.MessageCount+1 || l.LastUserMessage != "after the move" || !l.Created.Equal(info.Created) {
				t.Errorf("the appended session after the move: %+v", l)
			}
			continue
		}
		if !reflect.DeepEqual(l, info) {
			t.Errorf("%s after the move:\n got %+v\nwant %+v", info.ID, l, info)
		}
	}
	if l := listed[added]; l.MessageCount != 1 || l.LastUserMessage != "a new session" {
		t.Errorf("the new session after the move: %+v", l)
	}
	if _, ok := listed[deleted]; ok {
		t.Errorf("the deleted session is listed after the move")
	}
	if newest, err := fresh.ListNewest(ctx, len(got), nil); err != nil || !reflect.DeepEqual(newest, got) {
		t.Errorf("ListNewest after the move: %v\n got %+v\nwant %+v", err, newest, got)
	}
	if newest, err := fresh.ListNewest(ctx, 2, nil); err != nil || !reflect.DeepEqual(newest, got[:2]) {
		t.Errorf("ListNewest(2) after the move: %v, %+v", err, newest)
	}
	if latest, err := fresh.Latest(ctx); err != nil || !reflect.DeepEqual(latest.Info, got[0]) {
		t.Errorf("Latest after the move: %v", err)
	}
	for id, raw := range fixtureLogs {
		read, err := readRaw(ctx, fresh, id, 0)
		if err != nil || !bytes.HasPrefix(read, raw) || (id != appended) != (len(read) == len(raw)) {
			t.Errorf("%s: ReadLog after the move: %v, %d bytes, the fixture's %d", id, err, len(read), len(raw))
		}
		if err := fresh.Verify(ctx, id); err != nil {
			t.Errorf("%s: Verify after the move: %v", id, err)
		}
	}
	if _, err := fresh.Load(ctx, deleted); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("Load of the deleted session after the move: %v", err)
	}
	if _, err := fresh.Resolve(ctx, deleted[:6]); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("Resolve of the deleted session after the move: %v", err)
	}
	if report, err := fresh.CheckIndex(ctx); err != nil || !report.Clean() {
		t.Errorf("CheckIndex after the move: %v, %+v", err, report)
	}
}

// object reads one object of the env's bucket with minio-go.
func (e *env) object(t *testing.T, key string) []byte {
	t.Helper()
	for _, o := range e.readBucket(t) {
		if o.key == key {
			return o.data
		}
	}
	t.Fatalf("no object %s", key)
	return nil
}

// TestV3BucketDeleteLeavesNoContent: a session of a format-3 bucket
// deleted after the move to format 4 leaves none of its text in the
// bucket, as in a prefix that was always format 4
// (TestDeleteLeavesNoContent): not in its partition, not in the index
// log, and not in the shard of format 3 that listed it before the move.
func TestV3BucketDeleteLeavesNoContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	uploadFixture(t, e, v3Fixture)
	const victim, text = "7d00d1234567890abcdef0123456789a", "prompt 7d00 "
	if hits := e.scanFor(t, text); len(hits) == 0 {
		t.Fatalf("test setup: %q is nowhere in the fixture", text)
	}
	s := e.open(t)
	if err := s.AppendMessages(ctx, "0b77aa00112233445566778899aabbcc", []agent.PersistentMessage{user("after the move")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := e.object(t, "pfx/panto-store.json"); !strings.Contains(string(m), `"index-log"`) {
		t.Fatalf("the append did not move the index: %s", m)
	}
	deleteAll(t, s, victim)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := e.scanFor(t, text); len(hits) > 0 {
		t.Errorf("after the deletion these objects still hold the session's text: %v", hits)
	}
	if _, err := e.open(t).Load(ctx, victim); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("Load after the deletion: %v", err)
	}
}

// TestV3BucketConcurrentMove: Stores that opened a format-3 bucket and
// write to it at once all move it to format 4 (each moves what it read,
// and the partitions' If-Match and the log's If-None-Match settle the
// races): every session is in the partitions and the newest commit, the
// marker requires index-log, and the index checks clean.
func TestV3BucketConcurrentMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	uploadFixture(t, e, v3Fixture)
	want := fixtureList(t, v3Fixture)
	const stores = 6
	var ss []*objstore.Store
	for range stores {
		ss = append(ss, e.open(t))
	}
	ids := make([]string, stores)
	errs := make([]error, stores)
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = agent.NewSessionID()
			if errs[i] = s.AppendMessages(ctx, ids[i], []agent.PersistentMessage{user("during the move")}); errs[i] == nil {
				errs[i] = s.Flush(ctx)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if m := string(e.object(t, "pfx/panto-store.json")); !strings.Contains(m, `"index-log"`) {
		t.Fatalf("marker after the moves: %s", m)
	}
	entries, tombs := e.indexed(t)
	_, commit := e.newestCommit(t)
	for _, id := range append(infoIDs(want), ids...) {
		if _, ok := entries[id]; !ok {
			t.Errorf("%s is not in the index", id)
		}
		if _, ok := commit.Recent[id]; !ok {
			t.Errorf("%s is not in the newest commit", id)
		}
	}
	if _, ok := tombs["e1e2e3e4e5e6e7e8e9eaebecedeeeff0"]; !ok {
		t.Errorf("the tombstone is in no partition")
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Errorf("check after the moves: %v, %+v", err, report)
	}
}

// TestV3BucketReaderDuringMove: a Store that opened a bucket in format 3,
// which another Store moves to format 4 meanwhile, lists what is written
// after the move once its reading of the marker is older than two
// seconds (it reads the marker again before such a listing): it does not
// go on listing the 16 shards nobody writes any more.
func TestV3BucketReaderDuringMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	uploadFixture(t, e, v3Fixture)
	want := fixtureList(t, v3Fixture)
	r := e.open(t)
	if got, err := r.List(ctx); err != nil || len(got) != len(want) {
		t.Fatalf("list before the move: %v, %d sessions", err, len(got))
	}
	w := e.open(t)
	added := appendNew(t, w, "after the move")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := string(e.object(t, "pfx/panto-store.json")); !strings.Contains(m, `"index-log"`) {
		t.Fatalf("marker after the move: %s", m)
	}
	objstore.SetNow(r, func() time.Time { return time.Now().Add(3 * time.Second) })
	got, err := r.List(ctx)
	if err != nil || !slices.Contains(infoIDs(got), added) || len(got) != len(want)+1 {
		t.Errorf("list by a Store opened before the move: %v, %v; want the fixture's and %s", err, infoIDs(got), added)
	}
	if latest, err := r.Latest(ctx); err != nil || latest.Info.ID != added {
		t.Errorf("latest by a Store opened before the move: %v, want %s", err, added)
	}
}

// TestV3BucketDamagedShardMove: a format-3 bucket with a damaged shard
// says so when listed (ErrIndexDamaged: run repair), and is not moved to
// format 4 by a write, which would leave the shard's sessions out of the
// partitions silently: the write's messages are stored, its checkpoint
// says the index is damaged, and listings go on saying so. Repair moves
// it and lists every session again.
func TestV3BucketDamagedShardMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	uploadFixture(t, e, v3Fixture)
	want := fixtureList(t, v3Fixture)
	d := e.rawObject(t, "pfx/index/0.json.zst")
	d[len(d)/2] ^= 0x01
	e.putRaw(t, "pfx/index/0.json.zst", d)
	if _, err := e.open(t).List(ctx); !errors.Is(err, objstore.ErrIndexDamaged) {
		t.Fatalf("list with a damaged shard: %v, want ErrIndexDamaged", err)
	}
	const appended = "7d00d1234567890abcdef0123456789a"
	w := e.open(t)
	if err := w.AppendMessages(ctx, appended, []agent.PersistentMessage{user("after the damage")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); !errors.Is(err, objstore.ErrIndexDamaged) || !strings.Contains(err.Error(), "panto-sync repair") {
		t.Errorf("flush of a write to a damaged format-3 bucket: %v, want ErrIndexDamaged saying to repair", err)
	}
	if m := string(e.rawObject(t, "pfx/panto-store.json")); strings.Contains(m, `"index-log"`) {
		t.Errorf("a damaged format-3 bucket was moved: %s", m)
	}
	got, err := e.open(t).List(ctx)
	if len(got) != len(want) && !errors.Is(err, objstore.ErrIndexDamaged) {
		t.Errorf("list after the write: %d of %d sessions (%v), and no error says some are missing (%v)", len(got), len(want), infoIDs(got), err)
	}
	if conv, err := e.open(t).Load(ctx, appended); err != nil || conv.Messages[len(conv.Messages)-1].Text() != "after the damage" {
		t.Errorf("load of the session written after the damage: %v", err)
	}
	if _, err := e.open(t).RepairIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if m := string(e.rawObject(t, "pfx/panto-store.json")); !strings.Contains(m, `"index-log"`) {
		t.Errorf("marker after the repair: %s", m)
	}
	got, err = e.open(t).List(ctx)
	if err != nil || len(got) != len(want) || got[0].ID != appended || got[0].LastUserMessage != "after the damage" {
		t.Errorf("list after the repair: %v, %v", err, infoIDs(got))
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Errorf("check after the repair: %v, %+v", err, report)
	}
}
