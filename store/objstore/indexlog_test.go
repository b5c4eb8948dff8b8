package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// partitionKeyRe matches an index partition of format 4.
var partitionKeyRe = regexp.MustCompile(`^pfx/index/([0-9a-f]{2})\.json\.zst$`)

// partitions reads every index partition of the env's plaintext bucket
// behind the store's back: the sessions and tombstones they hold. Each
// must be filed in its own partition.
func (e *env) partitions(t testing.TB) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone) {
	t.Helper()
	return e.partitionsMatching(t, partitionKeyRe)
}

// partitionsMatching is partitions of the keys re matches (its first
// group the partition's name): those of a widened index, say.
func (e *env) partitionsMatching(t testing.TB, re *regexp.Regexp) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone) {
	t.Helper()
	codec, _ := manifest.NewCodec()
	entries := map[string]manifest.IndexEntry{}
	tombs := map[string]manifest.Tombstone{}
	for _, o := range e.rawBucket(t) {
		m := re.FindStringSubmatch(o.key)
		if m == nil {
			continue
		}
		sh, err := codec.DecodeIndexShard(o.key, o.data)
		if err != nil {
			t.Fatalf("partition %s: %v", o.key, err)
		}
		if sh.Shard != m[1] {
			t.Fatalf("partition %s holds shard %q", o.key, sh.Shard)
		}
		for id, en := range sh.Sessions {
			entries[id] = en
		}
		for id, tb := range sh.Tombstones {
			tombs[id] = tb
		}
	}
	return entries, tombs
}

// indexed is what a reader finds in the index of the env's plaintext
// bucket, behind the store's back: the partitions' entries, each
// replaced by the newest commit's unfolded one, or its runs' one, when
// that is longer.
func (e *env) indexed(t testing.TB) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone) {
	t.Helper()
	entries, tombs := e.partitions(t)
	if _, c := e.newestCommit(t); c != nil {
		codec, _ := manifest.NewCodec()
		unfolded := maps.Clone(c.Unfolded)
		for _, p := range c.Runs {
			page, err := codec.DecodeIndexShard(p.Key, e.rawObject(t, e.key(p.Key)))
			if err != nil {
				t.Fatalf("run page %s: %v", p.Key, err)
			}
			if unfolded == nil {
				unfolded = map[string]manifest.IndexEntry{}
			}
			for id, u := range page.Sessions {
				if old, ok := unfolded[id]; !ok || old.Length < u.Length {
					unfolded[id] = u
				}
			}
		}
		for id, u := range unfolded {
			if _, gone := tombs[id]; gone {
				continue
			}
			if old, ok := entries[id]; !ok || old.Length < u.Length {
				entries[id] = u
			}
		}
	}
	return entries, tombs
}

// logCommits reads every commit of the index log of the env's plaintext
// bucket behind the store's back, by number; each must say its number.
func (e *env) logCommits(t testing.TB) map[int64]*manifest.IndexShard {
	t.Helper()
	codec, _ := manifest.NewCodec()
	out := map[int64]*manifest.IndexShard{}
	for _, o := range e.rawBucket(t) {
		m := logCommitKey.FindStringSubmatch(o.key)
		if m == nil {
			continue
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		c, err := codec.DecodeIndexShard(o.key, o.data)
		if err != nil {
			t.Fatalf("index log commit %s: %v", o.key, err)
		}
		if c.Shard != manifest.LogName || c.Through != n {
			t.Fatalf("index log commit %s says shard %q, through %d", o.key, c.Shard, c.Through)
		}
		out[n] = c
	}
	for n, c := range out {
		if c.Base != 0 {
			if err := c.WithBase(out[c.Base]); err != nil {
				t.Fatalf("index log commit %d: %v", n, err)
			}
		}
	}
	return out
}

// newestCommit is the newest commit of the index log of the env's
// plaintext bucket, and its number (0 and nil: none). The commits before
// it are not read: they may be damaged.
// rewriteNewestCommit puts, behind the Stores' backs, the newest commit
// changed by edit as the next one (as another writer, an older panto,
// would write it).
func (e *env) rewriteNewestCommit(t testing.TB, edit func(c *manifest.IndexShard)) {
	t.Helper()
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	n, c := e.newestCommit(t)
	c.Through = n + 1
	edit(c)
	data, err := codec.EncodeIndexShard(commitKey(n+1), c)
	if err != nil {
		t.Fatal(err)
	}
	e.putRaw(t, e.key(commitKey(n+1)), data)
}

func (e *env) newestCommit(t testing.TB) (int64, *manifest.IndexShard) {
	t.Helper()
	codec, _ := manifest.NewCodec()
	var n int64
	var data []byte
	for _, o := range e.rawBucket(t) {
		if m := logCommitKey.FindStringSubmatch(o.key); m != nil {
			if k, _ := strconv.ParseInt(m[1], 10, 64); k > n {
				n, data = k, o.data
			}
		}
	}
	if data == nil {
		return 0, nil
	}
	c, err := codec.DecodeIndexShard(commitKey(n), data)
	if err != nil {
		t.Fatalf("index log commit %d: %v", n, err)
	}
	if c.Shard != manifest.LogName || c.Through != n {
		t.Fatalf("index log commit %d says shard %q, through %d", n, c.Shard, c.Through)
	}
	if c.Base != 0 {
		// Stored against a base: made whole from it.
		base, err := codec.DecodeIndexShard(commitKey(c.Base), e.rawObject(t, "pfx/"+commitKey(c.Base)))
		if err != nil {
			t.Fatalf("index log commit %d, the base of %d: %v", c.Base, n, err)
		}
		if err := c.WithBase(base); err != nil {
			t.Fatalf("index log commit %d: %v", n, err)
		}
	}
	return n, c
}

// commitKey is the key of commit n of the index log, relative to the
// store's prefix (as the seam records it).
func commitKey(n int64) string { return fmt.Sprintf("index/log/%020d.json.zst", n) }

// isReadOfNext reports whether ops are the check that commit n is still
// the newest: the GET of commit n+1 (a 404) and, beside it, the HEAD of n
// (a pruned n means the reader is far behind).
func isReadOfNext(ops []objstore.Op, n int64) bool {
	return len(ops) == 2 &&
		slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "GET" && o.Key == commitKey(n+1) && o.Err != nil }) &&
		slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "HEAD" && o.Key == commitKey(n) && o.Err == nil })
}

// appendNew appends one message of text to a new session through s, and
// returns its id.
func appendNew(t testing.TB, s *objstore.Store, text string) string {
	t.Helper()
	id := agent.NewSessionID()
	if err := s.AppendMessages(context.Background(), id, []agent.PersistentMessage{user(text)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestListNewestFromLog: Open reads the newest commit of the index log
// (a LIST of the log, then its GET; no partition), and from then on the
// first page of the listing (ListNewest, Latest) costs one round trip,
// the GET of the commit after it (a 404) and the HEAD of its own (still
// there: not pruned), however many sessions there are,
// and equals the first page of List. A page the commit's recent sessions
// cannot fill (fewer of them match, or more than manifest.RecentSize are
// asked for) is List's, read from the partitions. A commit another Store
// wrote since is read before the answer.
func TestListNewestFromLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	const n = manifest.RecentSize + 6
	for i := range n {
		appendNew(t, w, fmt.Sprintf("question %d", i))
	}
	if err := w.Close(ctx); err != nil { // its entries folded into the partitions
		t.Fatal(err)
	}
	all, err := e.open(t).List(ctx)
	if err != nil || len(all) != n {
		t.Fatalf("list: %v, %d sessions", err, len(all))
	}
	newest, _ := e.newestCommit(t)

	fb := e.faults(t)
	r := e.openOn(t, fb)
	ops := fb.Take()
	if countOps(ops, "LIST") != 1 || !slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "LIST" && o.Key == "index/log/" }) ||
		!slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "GET" && o.Key == commitKey(newest) }) ||
		slices.ContainsFunc(ops, func(o objstore.Op) bool { return partitionKeyRe.MatchString("pfx/" + o.Key) }) {
		t.Fatalf("Open's requests: %+v; want the log's LIST and its newest commit's GET, no partition", ops)
	}
	tens := func(info agent.SessionInfo) bool { return strings.HasSuffix(info.LastUserMessage, "0") }
	var allTens []agent.SessionInfo
	for _, info := range all {
		if tens(info) {
			allTens = append(allTens, info)
		}
	}
	for _, c := range []struct {
		name    string
		limit   int
		keep    func(agent.SessionInfo) bool
		want    []agent.SessionInfo
		fromLog bool
	}{
		{"the latest", 1, nil, all[:1], true},
		{"a page", 10, nil, all[:10], true},
		{"every recent session", manifest.RecentSize, nil, all[:manifest.RecentSize], true},
		{"more than the recent sessions", manifest.RecentSize + 1, nil, all[:manifest.RecentSize+1], false},
		{"a page of those kept", 3, tens, allTens[:3], true},
		// Six of the recent sessions end in 0; the seventh is older.
		{"more kept than the recent sessions hold", 7, tens, allTens[:7], false},
	} {
		rr := r
		if !c.fromLog {
			// A Store of its own: one that read the partitions once
			// keeps that reading for the next (catalog.go).
			rr = e.openOn(t, fb)
			fb.Take()
		}
		got, err := rr.ListNewest(ctx, c.limit, c.keep)
		ops := fb.Take()
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v\n got %v\nwant %v", c.name, err, infoIDs(got), infoIDs(c.want))
		}
		readPartitions := slices.ContainsFunc(ops, func(o objstore.Op) bool { return partitionKeyRe.MatchString("pfx/" + o.Key) })
		switch {
		case c.fromLog && !isReadOfNext(ops, newest):
			t.Errorf("%s: %+v, want the GET of commit %d and the HEAD of %d alone", c.name, ops, newest+1, newest)
		case !c.fromLog && !readPartitions:
			t.Errorf("%s: answered without reading the partitions (%d requests)", c.name, len(ops))
		}
	}
	if latest, err := r.Latest(ctx); err != nil || latest.Info.ID != all[0].ID {
		t.Fatalf("latest: %v", err)
	}
	if ops := fb.Take(); !isReadOfNext(ops, newest) {
		t.Fatalf("latest: %+v, want the GET of commit %d and the HEAD of %d alone", ops, newest+1, newest)
	}
	// Another Store's session: its commit is read, then the one after
	// it is found missing.
	later := appendNew(t, e.open(t), "later")
	if got, err := r.ListNewest(ctx, 2, nil); err != nil || len(got) != 2 || got[0].ID != later || got[1].ID != all[0].ID {
		t.Fatalf("after another Store's append: %v, %v", err, infoIDs(got))
	}
	has := func(ops []objstore.Op, method string, n int64, found bool) bool {
		return slices.ContainsFunc(ops, func(o objstore.Op) bool {
			return o.Method == method && o.Key == commitKey(n) && (o.Err == nil) == found
		})
	}
	if ops := fb.Take(); len(ops) != 4 || !has(ops, "GET", newest+1, true) || !has(ops, "HEAD", newest, true) ||
		!has(ops, "GET", newest+2, false) || !has(ops, "HEAD", newest+1, true) {
		t.Fatalf("after another Store's append: %+v, want the GETs of commits %d and %d (and the HEADs beside them)", ops, newest+1, newest+2)
	}
}

// TestLogConcurrentStores: Stores appending to distinct sessions at once,
// all of them after the same commit of the index log, each create the
// next commit with If-None-Match: one wins each number, the others read
// it and fold their changes into the next. The commits are numbered
// without a gap, each one's recent sessions hold the previous one's (no
// commit loses another's update), and the newest lists every session, as
// the partitions do.
func TestLogConcurrentStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	appendNew(t, e.open(t), "the first") // commit 1: every Store starts after it
	const stores = 20
	// Each Store's first commit waits until all of them try theirs: all
	// race for commit 2.
	var arrived atomic.Int64
	all := make(chan struct{})
	barrier := func(o objstore.Op) error {
		if o.Method != "PUT" || !strings.HasPrefix(o.Key, "index/log/") || arrived.Load() >= stores {
			return nil
		}
		if arrived.Add(1) == stores {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
		return nil
	}
	var fbs []*objstore.FaultBucket
	var ss []*objstore.Store
	for range stores {
		fb := e.faults(t)
		fb.SetFault(barrier)
		fbs = append(fbs, fb)
		ss = append(ss, e.openOn(t, fb))
	}
	ids := make([]string, stores)
	var wg sync.WaitGroup
	errs := make([]error, stores)
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = agent.NewSessionID()
			errs[i] = s.AppendMessages(ctx, ids[i], []agent.PersistentMessage{user(fmt.Sprintf("store %d", i))})
			if errs[i] == nil {
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
	lost, created := 0, 0
	for _, fb := range fbs {
		for _, o := range fb.Take() {
			if o.Method == "PUT" && o.Key == commitKey(2) {
				if o.Precondition() {
					lost++
				} else if o.Err == nil {
					created++
				}
			}
		}
	}
	if created != 1 || lost != stores-1 {
		t.Errorf("commit 2: created %d times, refused %d times; want 1 and %d", created, lost, stores-1)
	}
	commits := e.logCommits(t)
	newest, _ := e.newestCommit(t)
	for k := int64(1); k <= newest; k++ {
		c, prev := commits[k], commits[k-1]
		if c == nil {
			t.Fatalf("commit %d of %d is missing", k, newest)
		}
		if prev == nil {
			continue
		}
		for id := range prev.Recent {
			if _, ok := c.Recent[id]; !ok {
				t.Errorf("commit %d lost %s, which commit %d listed", k, id, k-1)
			}
		}
		for id := range c.Sessions {
			if _, ok := c.Recent[id]; !ok {
				t.Errorf("commit %d changed %s but does not list it", k, id)
			}
		}
	}
	entries, _ := e.indexed(t)
	recent := commits[newest].Recent
	for _, id := range ids {
		if _, ok := entries[id]; !ok {
			t.Errorf("%s is not in the index", id)
		}
		if _, ok := recent[id]; !ok {
			t.Errorf("%s is not in the newest commit (%d)", id, newest)
		}
	}
	if len(recent) != stores+1 || len(entries) != stores+1 {
		t.Errorf("the newest commit lists %d sessions, the index %d; want %d", len(recent), len(entries), stores+1)
	}
	r := e.open(t)
	list, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if page, err := r.ListNewest(ctx, stores+1, nil); err != nil || !reflect.DeepEqual(page, list) {
		t.Errorf("ListNewest: %v\n got %v\nwant %v", err, infoIDs(page), infoIDs(list))
	}
}

// TestDeleteLeavesNoLogCommit: the index log's commits list a session's
// last prompt among the recent sessions; once it is deleted — by a Store
// whose reading of the log is behind — no commit holds it (nor any other
// object), the newest commit records the tombstone, and a writer whose
// last commit listed the session does not bring it back.
func TestDeleteLeavesNoLogCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	victim := appendNew(t, w, secretTexts[0])
	deleter := e.open(t) // reads the log now: behind after the appends below
	var others []string
	for i := range 3 {
		others = append(others, appendNew(t, w, fmt.Sprintf("another session %d", i)))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	inLog := func() []string {
		var keys []string
		for _, k := range e.scanFor(t, secretTexts[0]) {
			if strings.HasPrefix(k, "pfx/index/log/") {
				keys = append(keys, k)
			}
		}
		return keys
	}
	if hits := inLog(); len(hits) < 2 {
		t.Fatalf("test setup: the victim's prompt is in %d commits (%v), want several", len(hits), hits)
	}
	deleteAll(t, deleter, victim)
	if hits := e.scanFor(t, secretTexts[0]); len(hits) > 0 {
		t.Errorf("after the deletion these objects hold the session's text: %v", hits)
	}
	n, c := e.newestCommit(t)
	if _, ok := c.Tombstones[victim]; !ok {
		t.Errorf("the newest commit (%d) has no tombstone for the deleted session: %+v", n, c.Tombstones)
	}
	if _, ok := c.Recent[victim]; ok || len(c.Recent) != len(others) {
		t.Errorf("the newest commit (%d) lists %d sessions, the deleted one: %v", n, len(c.Recent), ok)
	}
	// w last wrote a commit that listed the victim.
	others = append(others, appendNew(t, w, "after the deletion"))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := inLog(); len(hits) > 0 {
		t.Errorf("a later commit holds the deleted session's text again: %v", hits)
	}
	page, err := e.open(t).ListNewest(ctx, len(others), nil)
	if err != nil || len(page) != len(others) || slices.Contains(infoIDs(page), victim) {
		t.Errorf("newest after the deletion: %v, %v", err, infoIDs(page))
	}
}

// damageNewestCommit flips a byte of the newest commit of the index log,
// and returns its number.
func damageNewestCommit(t *testing.T, e *env) int64 {
	t.Helper()
	n, _ := e.newestCommit(t)
	key := e.key(commitKey(n))
	d := e.rawObject(t, key)
	d[len(d)/2] ^= 0x01
	e.putRaw(t, key, d)
	return n
}

// TestDamagedNewestCommit: a newest commit of the index log that does not
// decode hides only what it alone held (the entry it committed unfolded):
// List, ListNewest and Latest say the index is damaged, and list every
// other session from the partitions and the commit before it; writers go
// on from that commit; CheckIndex reports the log damaged (and, once a
// writer went on after it, the session it misses), and RepairIndex
// writes a commit that lists the newest sessions again.
func TestDamagedNewestCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, writer := range []bool{false, true} {
		e := newMemEnv(t)
		w := e.open(t)
		for i := range 5 {
			appendNew(t, w, fmt.Sprintf("question %d", i))
		}
		damageNewestCommit(t, e)
		s := e.open(t)
		report, err := s.CheckIndex(ctx)
		if err != nil || !slices.Equal(report.Damaged, []string{manifest.LogName}) || report.Clean() {
			t.Fatalf("writer %v: check of a damaged commit: %v, %+v", writer, err, report)
		}
		list, err := s.List(ctx)
		if !errors.Is(err, objstore.ErrIndexDamaged) || len(list) != 4 {
			t.Fatalf("writer %v: list: %v, %d sessions; want the 4 the commit before holds, and the damage", writer, err, len(list))
		}
		if page, err := s.ListNewest(ctx, 2, nil); !errors.Is(err, objstore.ErrIndexDamaged) || !reflect.DeepEqual(page, list[:2]) {
			t.Fatalf("writer %v: newest with a damaged commit: %v, %v", writer, err, infoIDs(page))
		}
		if _, err := s.Latest(ctx); !errors.Is(err, objstore.ErrIndexDamaged) {
			t.Fatalf("writer %v: latest with a damaged commit: %v", writer, err)
		}
		if writer {
			// A writer that never read the log, and one that did.
			for _, ws := range []*objstore.Store{e.open(t), w} {
				appendNew(t, ws, "after the damage")
				if err := ws.Flush(ctx); err != nil {
					t.Fatalf("a write after the damage: %v", err)
				}
			}
			list, err = e.open(t).List(ctx)
			if err != nil || len(list) != 6 {
				t.Fatalf("list after the writes: %v, %d sessions", err, len(list))
			}
			if page, err := e.open(t).ListNewest(ctx, 3, nil); err != nil || !reflect.DeepEqual(page, list[:3]) {
				t.Fatalf("newest after the writes: %v, %v, want %v", err, infoIDs(page), infoIDs(list[:3]))
			}
			report, err = e.open(t).CheckIndex(ctx)
			if err != nil || report.Clean() || len(report.Unindexed) != 1 {
				t.Fatalf("check after the writes: %v, %+v; want the session only the damaged commit held", err, report)
			}
		}
		repair, err := e.open(t).RepairIndex(ctx)
		if err != nil || !slices.Contains(repair.Rebuilt, manifest.LogName) {
			t.Fatalf("writer %v: repair: %v, %+v", writer, err, repair)
		}
		if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
			t.Fatalf("writer %v: check after the repair: %v, %+v", writer, err, report)
		}
		list, err = e.open(t).List(ctx)
		if want := map[bool]int{false: 5, true: 7}[writer]; err != nil || len(list) != want {
			t.Fatalf("writer %v: list after the repair: %v, %d sessions, want %d", writer, err, len(list), want)
		}
		_, c := e.newestCommit(t)
		if len(c.Recent) != len(list) {
			t.Fatalf("writer %v: the repaired commit lists %d sessions, want %d", writer, len(c.Recent), len(list))
		}
		fb := e.faults(t)
		r := e.openOn(t, fb)
		fb.Take()
		n, _ := e.newestCommit(t)
		page, err := r.ListNewest(ctx, 3, nil)
		if ops := fb.Take(); err != nil || !reflect.DeepEqual(page, list[:3]) || !isReadOfNext(ops, n) {
			t.Fatalf("writer %v: newest after the repair (commit %d): %v, %v; requests %v", writer, n, err, infoIDs(page), ops)
		}
	}
}

// TestRepairRecent: the newest commit's recent sessions may lag, never
// lie; CheckIndex reports (in Recent) every session they show that does
// not exist and every one they miss that is newer than the oldest they
// show, and RepairIndex writes a commit that lists the newest sessions,
// after which the index checks clean and ListNewest answers from it.
func TestRepairRecent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rewrite := func(t *testing.T, e *env, edit func(c *manifest.IndexShard)) {
		t.Helper()
		e.rewriteNewestCommit(t, edit)
	}
	removeLog := func(t *testing.T, e *env) {
		t.Helper()
		for _, o := range e.rawBucket(t) {
			if strings.HasPrefix(o.key, "pfx/index/log") {
				e.removeRaw(t, o.key)
			}
		}
	}
	ghost := "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name    string
		breakIt func(t *testing.T, e *env, ids []string)
		wrong   func(ids []string) []string // what CheckIndex reports
	}{
		{"the log deleted", func(t *testing.T, e *env, ids []string) { removeLog(t, e) },
			func(ids []string) []string { return ids }},
		{"the log deleted, then a writer", func(t *testing.T, e *env, ids []string) {
			removeLog(t, e)
			appendNew(t, e.open(t), "after the loss")
		}, func(ids []string) []string { return ids }},
		{"a session missing", func(t *testing.T, e *env, ids []string) {
			rewrite(t, e, func(c *manifest.IndexShard) { delete(c.Recent, ids[2]) })
		}, func(ids []string) []string { return ids[2:3] }},
		{"a session that does not exist", func(t *testing.T, e *env, ids []string) {
			rewrite(t, e, func(c *manifest.IndexShard) {
				g := c.Recent[ids[0]]
				g.Info.ID = ghost
				g.Info.Modified = g.Info.Modified.Add(time.Hour)
				c.Recent[ghost] = g
			})
		}, func(ids []string) []string { return []string{ghost} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newMemEnv(t)
			w := e.open(t)
			var ids []string
			for i := range 4 {
				ids = append(ids, appendNew(t, w, fmt.Sprintf("question %d", i)))
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			c.breakIt(t, e, ids)
			want := slices.Clone(c.wrong(ids))
			slices.Sort(want)
			report, err := e.open(t).CheckIndex(ctx)
			if err != nil || !slices.Equal(report.Recent, want) || report.Clean() {
				t.Fatalf("check: %v, Recent %v, want %v (%+v)", err, report.Recent, want, report)
			}
			if _, err := e.open(t).RepairIndex(ctx); err != nil {
				t.Fatal(err)
			}
			if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
				t.Fatalf("check after the repair: %v, %+v", err, report)
			}
			r := e.open(t)
			list, err := r.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, commit := e.newestCommit(t)
			if len(commit.Recent) != len(list) {
				t.Errorf("the repaired commit lists %d sessions, List %d", len(commit.Recent), len(list))
			}
			if page, err := r.ListNewest(ctx, len(list), nil); err != nil || !reflect.DeepEqual(page, list) {
				t.Errorf("newest after the repair: %v, %v, want %v", err, infoIDs(page), infoIDs(list))
			}
		})
	}
}

// TestDeleteRacingCheckpoint: a deletion that overtakes the checkpoint of
// an append before it (the append's index entry reached the partition,
// its commit of the index log not yet) leaves the session's text in no
// commit, and the newest commit does not list the deleted session: the
// lagging commit, folded after the deletion's, must not bring it back.
func TestDeleteRacingCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	w := e.openOn(t, fb)
	victim := appendNew(t, w, "the first prompt")
	other := appendNew(t, w, "another session")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fb.SetFault(func(o objstore.Op) error {
		if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/") {
			once.Do(func() { close(reached) })
			<-release
		}
		return nil
	})
	if err := w.AppendMessages(ctx, victim, []agent.PersistentMessage{user(secretTexts[1])}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached: // the append's entry is on its way to the log
	case <-time.After(30 * time.Second):
		t.Fatal("the append's checkpoint never reached the index log")
	}
	// The index lags the append: the deletion is of the session as it
	// is (a deletion of what the index says would be refused: the log
	// changed since).
	d := e.open(t)
	rc, at, err := d.ReadLog(ctx, victim, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if err := d.Delete(ctx, store.Tombstone{ID: victim, Deleted: time.Now().UTC(), At: at}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := e.scanFor(t, secretTexts[1]); len(hits) > 0 {
		t.Errorf("after the deletion these objects hold the session's text: %v", hits)
	}
	if page, err := e.open(t).ListNewest(ctx, 1, nil); err != nil || len(page) != 1 || page[0].ID != other {
		t.Errorf("newest after the deletion: %v, %v; want %s alone", err, infoIDs(page), other)
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Errorf("check after the deletion: %v, %+v", err, report)
	}
}

// TestLogPruneAndHead: every 64th commit of the index log deletes the
// commits 64 and more before it and records its number in the log's head,
// so that the log keeps between 64 and 128 commits however many writes
// there were; a reader whose credentials may not LIST finds the newest
// commit from the head, by probing the numbers after it, and answers the
// first page of the listing from it.
func TestLogPruneAndHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	wb := e.faults(t)
	w := e.openOn(t, wb)
	for i := range 2*manifest.RecentSize + 2 {
		appendNew(t, w, fmt.Sprintf("question %d", i))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, newest := e.newestCommit(t)
	const keep = 64
	pruned := n - n%keep
	if pruned < 2*keep {
		t.Fatalf("test setup: %d commits, want at least %d", n, 2*keep)
	}
	// Each pruning deletes its commits in one request, not one each.
	var prunings []int
	for _, o := range wb.Take() {
		switch {
		case o.Method == "DELETE" && strings.HasPrefix(o.Key, "index/log/"):
			t.Fatalf("a pruning deleted %s alone: want the log's commits deleted many to a request", o.Key)
		case o.Method == "DELETES" && strings.HasPrefix(o.Key, "index/log/"):
			prunings = append(prunings, len(o.Keys))
		}
	}
	// The first pruning (commit 64) has nothing before commit 0 to delete.
	if want := int(pruned/keep) - 1; len(prunings) != want || prunings[len(prunings)-1] != keep {
		t.Errorf("%d commits pruned in requests of %v keys; want %d requests, the last of %d", n, prunings, want, keep)
	}
	var kept []int64
	for k := range e.logCommits(t) {
		kept = append(kept, k)
	}
	slices.Sort(kept)
	// The commit logKeep before the last pruning one stays: the commits
	// after it are stored against it.
	if int64(len(kept)) != n-(pruned-keep)+1 || kept[0] != pruned-keep || kept[len(kept)-1] != n {
		t.Errorf("after %d commits the log keeps %d of them, %v..%v; want %d..%d", n, len(kept), kept[0], kept[len(kept)-1], pruned-keep, n)
	}
	codec, _ := manifest.NewCodec()
	head, err := codec.DecodeIndexShard("index/log-head.json.zst", e.rawObject(t, e.key("index/log-head.json.zst")))
	if err != nil || head.Shard != manifest.LogName || head.Through != pruned || len(head.Sessions)+len(head.Recent) != 0 {
		t.Fatalf("the log's head: %v, %+v; want commit %d and no session", err, head, pruned)
	}

	fb := e.faults(t)
	fb.SetFault(func(o objstore.Op) error {
		if o.Method == "LIST" {
			return objstore.ErrForbidden
		}
		return nil
	})
	r := e.openOn(t, fb)
	fb.Take()
	list, err := e.open(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := r.ListNewest(ctx, 5, nil)
	if err != nil || !reflect.DeepEqual(page, list[:5]) {
		t.Fatalf("newest without LIST: %v, %v, want %v", err, infoIDs(page), infoIDs(list[:5]))
	}
	ops := fb.Take()
	if slices.ContainsFunc(ops, func(o objstore.Op) bool { return partitionKeyRe.MatchString("pfx/" + o.Key) }) ||
		!slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "GET" && o.Key == commitKey(n) }) {
		t.Errorf("newest without LIST: %+v; want the newest commit read, no partition", ops)
	}
	if latest, err := r.Latest(ctx); err != nil || latest.Info.ID != list[0].ID || len(newest.Recent) != manifest.RecentSize {
		t.Errorf("latest without LIST: %v", err)
	}
}

// TestLogFarBehind: a Store whose reading of the index log is older than
// what pruning keeps (another Store wrote more than 128 commits since it
// opened) still lists the newest sessions, and its next commit is built on
// the newest one: a pruned number is not the end of the log.
func TestLogFarBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	appendNew(t, e.open(t), "the first")
	behind := e.open(t) // knows commit 1
	w := e.open(t)
	for i := range 2*manifest.RecentSize + 2 {
		appendNew(t, w, fmt.Sprintf("question %d", i))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if e.maybeRawObject(t, e.key(commitKey(2))) != nil {
		t.Fatal("test setup: commit 2 was not pruned")
	}
	list, err := e.open(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if latest, err := behind.Latest(ctx); err != nil || latest.Info.ID != list[0].ID {
		t.Errorf("latest by a Store far behind: %v, %v; want %s", err, latest, list[0].ID)
	}
	if page, err := behind.ListNewest(ctx, 3, nil); err != nil || !reflect.DeepEqual(page, list[:3]) {
		t.Errorf("newest by a Store far behind: %v, %v; want %v", err, infoIDs(page), infoIDs(list[:3]))
	}
	// Its write, after others' 130: the newest session, which the newest
	// commit must list.
	mine := appendNew(t, behind, "far behind")
	if err := behind.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if latest, err := e.open(t).Latest(ctx); err != nil || latest.Info.ID != mine {
		t.Errorf("latest after the write of a Store far behind: %v, want %s", err, mine)
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Errorf("check after the write of a Store far behind: %v, %+v", err, report)
	}
}

// TestDeleteThenStaleStore: a deletion deletes every commit of the index
// log before its own; a Store whose reading is older than that (it read a
// commit that listed the deleted session) must neither list the deleted
// session nor, with its next write, put the deleted session's text back
// in a commit — nor leave that write out of the newest commit.
func TestDeleteThenStaleStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	other := appendNew(t, w, "another session")
	victim := appendNew(t, w, secretTexts[0])
	stale := e.open(t) // its reading lists the victim
	third := appendNew(t, w, "a third session")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deleteAll(t, e.open(t), victim)
	if hits := e.scanFor(t, secretTexts[0]); len(hits) > 0 {
		t.Fatalf("after the deletion these objects hold the session's text: %v", hits)
	}
	if page, err := stale.ListNewest(ctx, 2, nil); err != nil || !slices.Equal(infoIDs(page), []string{third, other}) {
		t.Errorf("newest by a Store that read the log before the deletion: %v, %v; want %v", err, infoIDs(page), []string{third, other})
	}
	mine := appendNew(t, stale, "after the deletion")
	if err := stale.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := e.scanFor(t, secretTexts[0]); len(hits) > 0 {
		t.Errorf("after a write by that Store these objects hold the deleted session's text: %v", hits)
	}
	if latest, err := e.open(t).Latest(ctx); err != nil || latest.Info.ID != mine {
		t.Errorf("latest after that Store's write: %v, want %s", err, mine)
	}
}

// TestDeletionShrinksRecent: a deletion takes its session out of the
// newest commit's recent view, which then holds fewer than
// manifest.RecentSize sessions without holding them all; the older
// sessions it no longer shows are the full listing's, and the index
// checks clean (it reported them as missing from the view).
func TestDeletionShrinksRecent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	var ids []string
	for i := range manifest.RecentSize + 8 {
		ids = append(ids, appendNew(t, w, fmt.Sprintf("session %d", i)))
	}
	at, err := store.Head(ctx, w, ids[len(ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, store.Tombstone{ID: ids[len(ids)-1], Deleted: time.Now(), At: at}); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); len(c.Recent) != manifest.RecentSize-1 || c.Complete {
		t.Fatalf("the view after the deletion holds %d sessions (complete %v), want %d", len(c.Recent), c.Complete, manifest.RecentSize-1)
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check after the deletion: %v, recent %v", err, report.Recent)
	}
}
