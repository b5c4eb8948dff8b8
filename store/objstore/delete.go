package objstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// Deleting a session (package store's Deleter; docs/DESIGN.md, "Deleting
// sessions"). The commit point is the same as an append's (§P1): a
// create, with If-None-Match: *, of the segment after the log's end —
// holding a tombstone instead of lines — so that a deletion and an append
// racing for that position cannot both win. Then the first segment is
// replaced by a tombstone too (If-Match): seg/0 marks the session as
// existing for ever (§P5), and a create of the id fails on it. Then every
// other object of the session is deleted, by the names its manifest and
// the segments probed after it give (so that a writer without
// s3:ListBucket can delete), and then, where the credentials may list,
// whatever else the session's prefix holds. Last, the index shard buries
// the session and is rewritten without it, its older deltas deleted.
// Each step is idempotent, so a deletion cut short is finished by the
// next one; finishing one needs the listing, since the names it had are
// gone with the objects it deleted.

var _ store.Deleter = (*Store)(nil)

// Delete removes session t.ID's content and leaves tombstone t, if t
// covers the log (store.Tombstone.Covers); otherwise a *store.ChangedError.
func (s *Store) Delete(ctx context.Context, t store.Tombstone) error {
	if err := agent.ValidateSessionID(t.ID); err != nil {
		return err
	}
	id := t.ID
	fail := func(err error) error { return fmt.Errorf("delete session %s: %w", id, err) }
	if err := s.ensureFeature(ctx, manifest.FeatureTombstones); err != nil {
		return fail(err)
	}
	tomb := manifest.Tombstone{ID: id, Deleted: t.Deleted.UTC(), Length: t.At.Length, SHA256: t.At.SHA256}
	s.runs.deleting.Add(1)
	defer s.runs.deleting.Add(-1)
	s.prefetchBurial(ctx, id)
	st := s.state(id)
	if err := st.mu.lock(ctx); err != nil {
		return fail(err)
	}
	defer st.mu.unlock()
	for attempt := 0; ; attempt++ {
		// This Store's own reading of the log (a load, or the copy into a
		// local-first replica that comes just before a deletion) says
		// where the commit point goes, as it does for an append
		// (prepare): an append since took that position, and the PUT's
		// 412 has the log read again. A reading older than half the
		// compaction grace, one resumed from the index, and any after a
		// refusal are not trusted: the log is read first.
		var err error
		var seg0 *earlyGet // the first segment, when the refresh read it
		if attempt > 0 || !st.loaded || st.partial > 0 || s.now().Sub(st.fresh) > s.compactGrace/2 {
			seg0, err = s.refreshFirst(ctx, id, st)
		}
		if old, ok := tombstoneOf(err); ok {
			// Deleted already (maybe by a run cut short): finish it.
			known, err := s.knownObjects(ctx, id)
			if err != nil {
				return fail(err)
			}
			return s.finishDelete(ctx, id, old, -1, known, !s.buried(ctx, id), nil)
		}
		if err != nil {
			return fail(err)
		}
		have := store.Checkpoint{Length: st.m.Length, SHA256: st.m.SHA256}
		if !t.Covers(have) {
			return fail(&store.ChangedError{ID: id, Want: t.At, Have: have})
		}
		// The commit point: the position after the log's end. The first
		// segment, which the tombstone replaces next, is read beside it,
		// unless the refresh just read it: its ETag is as good as one
		// read a round trip later, since the tombstone's If-Match fails
		// the same way on a first segment replaced since either.
		var first earlyGets
		switch key := s.sessionKey(id, manifest.SegmentName(0)); {
		case have.Length == 0:
		case seg0 != nil:
			first = earlyGets{key: seg0}
		default:
			first = s.startGets(ctx, key)
		}
		// And the project's head, whose burial of the session goes out
		// before the deletion's commit.
		s.prefetchHead(ctx, st.m.Info().Project)
		at := s.sessionKey(id, manifest.SegmentName(have.Length))
		_, err = s.put(ctx, at, s.codec.EncodeTombstoneObject(at, tomb), putCond{ifNoneMatch: true}, s.objectType())
		if err == nil {
			st.loaded = false
			s.queueHeadBurial(st.m.Decoder.Info.Project, tomb)
			return s.finishDelete(ctx, id, tomb, have.Length, s.sessionObjects(st.m, st.stored), false, first)
		}
		if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			return fail(err)
		}
		// An append (or a create, for a session we did not hold) won the
		// position: read what is there now, and decide again.
		if attempt+1 >= s.maxAttempts {
			return fail(fmt.Errorf("gave up after %d attempts: %w", attempt+1, err))
		}
		if err := backoff(ctx, attempt); err != nil {
			return fail(err)
		}
	}
}

// finishDelete is a deletion after its commit point (at end, the log's
// length then; -1 when not known): the first segment replaced by the
// tombstone, every other object of the session deleted (known: the names
// known, in the order to delete them; mustList: a listing is the only way
// to find the rest, see sweep), the index buried and purged. A sweep that
// could not list when it had to still buries the session (it is deleted:
// its reads say so), and returns a *PermissionError saying what was left.
// early holds the read of the first segment sent with the commit point
// (none: it is read here).
func (s *Store) finishDelete(ctx context.Context, id string, tomb manifest.Tombstone, end int64, known []string, mustList bool, early earlyGets) error {
	fail := func(err error) error { return fmt.Errorf("delete session %s: %w", id, err) }
	first := s.sessionKey(id, manifest.SegmentName(0))
	// The sweep's listing goes out beside seg/0's tombstone: past the
	// commit point no append adds an object, and the listing only reads.
	listed := make(chan sessionListing, 1)
	go func() {
		objects, _, err := s.b.list(ctx, s.sessionKey(id, ""), "")
		listed <- sessionListing{objects, err}
	}()
	// Past the commit point the session's reads say it is deleted, so
	// what the index will say goes out now too: its project's head
	// buries it (the commit after may not come before the head, but
	// nothing bars the head from coming sooner; one that fails stays
	// queued, for the commit's writeHeads), and the run pages that hold
	// its summary are written anew without it, for its commit to name
	// (prewritePurge). Each is a round trip less after the commit. Cut
	// short after this, the deletion leaves the session off its
	// project's page, where its reads say deleted; a sync, which lists
	// the partitions and runs, still meets it and finishes it.
	var ahead sync.WaitGroup
	var purge *purgeAhead
	ahead.Add(2)
	go func() {
		defer ahead.Done()
		if !s.deferIndex {
			_ = s.writeHeads(ctx)
		}
	}()
	go func() {
		defer ahead.Done()
		purge = s.prewritePurge(ctx, id)
	}()
	defer func() {
		// Not queued (the deletion failed before its commit): no commit
		// will name the pages written ahead.
		ahead.Wait()
		s.dropAhead(context.WithoutCancel(ctx), purge)
	}()
	if end != 0 {
		data, etag, err := early.getTagged(ctx, s, first)
		switch {
		case errors.Is(err, errNotFound):
			_, err = s.put(ctx, first, s.codec.EncodeTombstoneObject(first, tomb), putCond{ifNoneMatch: true}, s.objectType())
		case err != nil:
		default:
			if _, ok := s.decodeTombstone(first, data); !ok {
				_, err = s.put(ctx, first, s.codec.EncodeTombstoneObject(first, tomb), putCond{ifMatch: etag}, s.objectType())
			}
		}
		if err != nil && !errors.Is(err, errPrecondition) {
			return fail(err)
		}
	}
	// The content goes before the index buries the session: a deletion
	// cut short in between is listed as live (its reads say deleted), so
	// the next deletion or sync that meets it finishes it. The other way
	// round, it would be listed as deleted with its segments still there,
	// and nothing would come back for them.
	unswept, err := s.sweep(ctx, id, tomb, end, known, mustList, listed)
	if err != nil {
		return err
	}
	ahead.Wait()
	// The index log before the partition: its commit takes the session
	// out of the recent sessions, names it in Unpurged, and puts the run
	// pages written ahead in the place of those that hold it; then the
	// partition buries it while the commits before, which may hold its
	// summary, and the pages retired are deleted (writeLogBeside). Cut
	// short anywhere after the commit, the note has the next listing of
	// tombstones finish the deletion (purge.go: finishDeletions).
	if s.indexLog() {
		s.queueDeletion(ctx, tomb, purge)
		purge = nil
	}
	name := s.queueTombstone(tomb)
	if !s.deferIndex {
		// The partition buries the session once the commit names it, as
		// the commits before are deleted.
		if err := s.writeLogBeside(ctx, func(ctx context.Context) error { return s.writeShard(ctx, name) }); err != nil {
			return fail(err)
		}
		if err := s.purgeBuried(ctx); err != nil {
			return fail(err)
		}
		// A burial the partition's entry asked for (a deletion cut
		// short finished here, whose log no longer says its project).
		if err := s.writeHeads(ctx); err != nil {
			return fail(err)
		}
	}
	if unswept != nil {
		return fmt.Errorf("session %s is deleted, but what a deletion cut short may have left under %s could not be looked for: %w", id, s.objectURL(s.sessionKey(id, "")), unswept)
	}
	return nil
}

// sessionListing is a LIST of a session's prefix: what it found, or
// why it failed.
type sessionListing struct {
	objects []listed
	err     error
}

// sweep deletes every object of session id but its tombstones: seg/0 and
// the segment at end (its commit point; -1: keep every tombstone found).
// It lists the session's prefix, and deletes what the listing finds with
// the names known in one request (DeleteObjects: a session of 30
// segments costs two round trips, not 31): a merged segment of a
// compaction cut short, or, finishing a deletion cut short, whatever it
// had not deleted, are found so. Cut short, the next deletion lists again.
// listed gives the listing, sent by the caller.
// Credentials that may not list (s3:ListBucket) delete the names known,
// one at a time in their order, so that a deletion cut short leaves what
// the next one finds by reading the manifest and probing after it: the
// names known are every object of a session the protocol knows of, so
// that is what a writer's deletion needs; unless mustList says a listing
// is the only way to finish, when the refusal comes back as unswept.
func (s *Store) sweep(ctx context.Context, id string, tomb manifest.Tombstone, end int64, known []string, mustList bool, listed <-chan sessionListing) (unswept, err error) {
	keep := map[string]bool{s.sessionKey(id, manifest.SegmentName(0)): true}
	if end >= 0 {
		keep[s.sessionKey(id, manifest.SegmentName(end))] = true
	}
	var l sessionListing
	select {
	case l = <-listed:
	case <-ctx.Done():
		return nil, fmt.Errorf("delete session %s: %w", id, ctx.Err())
	}
	objects, err := l.objects, l.err
	switch {
	case errors.Is(err, ErrPermission):
		for _, k := range known {
			if keep[k] {
				continue
			}
			// A list of replaced objects goes after what it names, which
			// nothing else names.
			if rel := strings.TrimPrefix(k, s.sessionKey(id, "")); manifest.IsReplacedList(rel) {
				named, err := s.replacedNames(ctx, id, rel)
				if err != nil {
					return nil, fmt.Errorf("delete session %s: %w", id, err)
				}
				for _, n := range named {
					if err := s.b.delete(ctx, n); err != nil {
						return nil, fmt.Errorf("delete session %s: %w", id, err)
					}
				}
			}
			if err := s.b.delete(ctx, k); err != nil {
				return nil, fmt.Errorf("delete session %s: %w", id, err)
			}
		}
		if mustList {
			return err, nil
		}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("delete session %s: %w", id, err)
	}
	fences := s.fences(id, end, objects)
	var keys []string
	doomed := map[string]bool{}
	for k := range fences {
		doomed[k] = true // replaced, not deleted
	}
	for _, k := range known {
		if !keep[k] && !doomed[k] {
			doomed[k] = true
			keys = append(keys, k)
		}
	}
	for _, k := range listedKeys(objects) {
		if keep[k] || doomed[k] {
			continue
		}
		if end < 0 && strings.HasSuffix(k, ".jsonl.zst") && !strings.Contains(k, "-") {
			if data, _, err := s.b.get(ctx, k, ""); err == nil {
				if _, ok := s.decodeTombstone(k, data); ok {
					continue // the commit point of the deletion
				}
			}
		}
		doomed[k] = true
		keys = append(keys, k)
	}
	// The fences go at once, beside the DeleteObjects: a session is
	// compacted past 32 segments, so that is about how many of its last
	// hour's remain, and one round trip for them all.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	g.Go(func() error { return s.b.deleteKeys(gctx, keys) })
	for k := range fences {
		g.Go(func() error {
			_, err := s.put(gctx, k, s.codec.EncodeTombstoneObject(k, tomb), putCond{}, s.objectType())
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil, nil
}

// fences are the appended segments of session id, among the objects its
// listing found, that a deletion replaces with its tombstone rather than
// deletes: those written in the last compactGrace before the newest
// (the deletion's commit point, written just before, by the server's
// clock). An appender puts its segment at the log's end as it last knew
// it, with If-None-Match: *; one that knew it a moment ago, before
// another writer's appends, puts it where the first of those was. Were
// that segment deleted, the append would land there after the deletion,
// its text kept in the deleted session's prefix, where nothing lists or
// deletes it, and its writer told it was stored (a local-first copy then
// took the deletion for one of what it had sent, and lost the turn). A
// tombstone in its place refuses the append, and the writer, reading
// it, learns of the deletion. An appender re-reads a log it knew more
// than half the grace ago before it appends (prepare), so older
// segments go as before. seg/0 and the commit point are tombstones
// already.
func (s *Store) fences(id string, end int64, objects []listed) map[string]bool {
	var newest time.Time
	for _, o := range objects {
		if o.modified.After(newest) {
			newest = o.modified
		}
	}
	fences := map[string]bool{}
	for _, o := range objects {
		rel, ok := strings.CutPrefix(o.key, s.sessionKey(id, ""))
		if !ok || !manifest.IsAppendedSegmentName(rel) || rel == manifest.SegmentName(0) || (end >= 0 && rel == manifest.SegmentName(end)) {
			continue
		}
		if newest.Sub(o.modified) <= s.compactGrace {
			fences[o.key] = true
		}
	}
	return fences
}

// prefetchBurial starts reading what burying session id in the index
// will write (format 4): its partition, and the run pages the newest
// commit this Store read names over it, which a purge rewrites without
// it (purge.go). Their GETs so go out with the deletion's first reads
// instead of after its commit; the writes wait for them, and read again
// what changed since.
func (s *Store) prefetchBurial(ctx context.Context, id string) {
	if !s.indexLog() {
		return
	}
	name := s.shardOf(id)
	s.prefetchPartition(ctx, name)
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	if pages := pagesCovering(c, []string{name}); len(pages) > 0 && !s.pagesKept(pages) {
		go func() { _, _, _ = s.readRunPages(context.WithoutCancel(ctx), pages) }()
	}
}

// sessionObjects are the objects of a session that m, its state as read
// (the stored manifest, listing its first stored segments, and the
// segments probed after them), names: in the order a deletion removes
// them, so that one cut short leaves what the next one can still find by
// the same reading where there is a manifest. The probed segments go
// first, last to first (what is left of them is found by probing from the
// manifest), then the replaced segments compaction left to delete, the
// listed segments, and the manifest last. (A session without a manifest
// is probed from seg/0, which is a tombstone by then: finishing its
// deletion needs the listing.)
func (s *Store) sessionObjects(m *manifest.Manifest, stored int) []string {
	stored = min(stored, len(m.Segments))
	var names []string
	key := func(rel string) string { return s.sessionKey(m.ID, rel) }
	for i := len(m.Segments) - 1; i >= stored; i-- {
		names = append(names, key(m.Segments[i].Name()))
	}
	for _, p := range m.Pending {
		names = append(names, key(p.Name))
	}
	for _, seg := range m.Segments[:stored] {
		names = append(names, key(seg.Name()))
	}
	return append(names, key("manifest.json"))
}

// knownObjects reads what is left of a deleted session's objects by name,
// as sessionObjects orders them: the manifest if it is still there, and
// the segments probed after it up to the deletion's commit point (or the
// first one already deleted).
func (s *Store) knownObjects(ctx context.Context, id string) ([]string, error) {
	m, _, err := s.readManifest(ctx, id)
	if errors.Is(err, ErrCorrupt) || errors.Is(err, manifest.ErrInvalid) {
		return []string{s.sessionKey(id, "manifest.json")}, nil // listed and deleted as the rest
	}
	if err != nil {
		return nil, err
	}
	stored := len(m.Segments)
	if _, err := s.catchUp(ctx, m, 0, nil); err != nil {
		if _, deleted := tombstoneOf(err); !deleted && !errors.Is(err, ErrCorrupt) {
			return nil, err
		}
	}
	return s.sessionObjects(m, stored), nil
}

// buried reports whether session id's index shard holds its tombstone:
// then its deletion went through to the end (the content goes before the
// burial), and only strays a listing would find can be left.
func (s *Store) buried(ctx context.Context, id string) bool {
	_, tombs, err := s.readIndexAll(ctx, []string{s.shardOf(id)})
	_, ok := tombs[id]
	return ok && err == nil
}

// tombstoneAt reads the tombstone that took the place of session id's
// first segment.
func (s *Store) tombstoneAt(ctx context.Context, id string) (manifest.Tombstone, bool) {
	first := s.sessionKey(id, manifest.SegmentName(0))
	data, _, err := s.b.get(ctx, first, "")
	if err != nil {
		return manifest.Tombstone{}, false
	}
	t, ok := s.decodeTombstone(first, data)
	return t, ok && t.ID == id
}

// decodeTombstone reports whether data, the object rel stored where a
// segment would be, is a tombstone.
func (s *Store) decodeTombstone(rel string, data []byte) (manifest.Tombstone, bool) {
	raw, err := s.codec.DecodeSegment(rel, data)
	if err != nil {
		return manifest.Tombstone{}, false
	}
	return manifest.DecodeTombstone(raw)
}

// deletedError is the error of reading a tombstone where a segment of
// session id was expected: an agent.DeletedError, that keeps the
// tombstone for this package.
func deletedError(id string, t manifest.Tombstone) error {
	return &buriedError{DeletedError: agent.DeletedError{ID: id, Deleted: t.Deleted, Length: t.Length, SHA256: t.SHA256}, tomb: t}
}

type buriedError struct {
	agent.DeletedError
	tomb manifest.Tombstone
}

func (e *buriedError) Unwrap() error { return &e.DeletedError }

// tombstoneOf returns the tombstone a read ran into, if it did.
func tombstoneOf(err error) (manifest.Tombstone, bool) {
	var b *buriedError
	if errors.As(err, &b) {
		return b.tomb, true
	}
	return manifest.Tombstone{}, false
}

// Tombstones lists the bucket's tombstones younger than
// store.TombstoneRetention, from the index (catalog.go).
func (s *Store) Tombstones(ctx context.Context) ([]store.Tombstone, error) {
	if err := s.settle(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("list deleted sessions: %w", err)
	}
	// Best effort, as the partitions' purges below: credentials that may
	// only read (a pull's) leave the note for a writer. Before the
	// listing, which then lists what it buried.
	_ = s.finishDeletions(ctx)
	_, tombs, err := s.catalog(ctx)
	if tombs == nil && err != nil {
		return nil, fmt.Errorf("list deleted sessions: %w", err)
	}
	s.finishPurges(ctx)
	out := make([]store.Tombstone, 0, len(tombs))
	for _, t := range tombs {
		if s.now().Sub(t.Deleted) <= store.TombstoneRetention {
			out = append(out, store.Tombstone{ID: t.ID, Deleted: t.Deleted, At: store.Checkpoint{Length: t.Length, SHA256: t.SHA256}})
		}
	}
	slices.SortFunc(out, func(a, b store.Tombstone) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

// expireTombstones drops from a base the tombstones older than the
// retention: listings stop carrying them (the session's seg/0 tombstone
// still refuses the id).
func (s *Store) expireTombstones(base *manifest.IndexShard) {
	for id, t := range base.Tombstones {
		if s.now().Sub(t.Deleted) > store.TombstoneRetention {
			delete(base.Tombstones, id)
		}
	}
}

// finishPurge deletes the deltas v's base asks to purge, then writes the
// base again saying they are gone. A base written by another writer in
// between keeps the request (folds carry Purge), and is finished by
// whoever reads it next.
func (s *Store) finishPurge(ctx context.Context, name string, v shardView) error {
	if !v.purgePending() {
		return nil
	}
	if err := s.deleteDeltas(ctx, name, v.base.Pruned+1, v.base.Purge); err != nil {
		return err
	}
	base := v.shard.Clone()
	base.Through, base.Pruned, base.Purge, base.Written = v.applied, v.base.Purge, 0, s.now().UTC()
	_, err := s.putBase(ctx, name, base, v.etag)
	if err != nil && !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
		return fmt.Errorf("purge index shard %s: %w", name, err)
	}
	return nil
}

// putBase writes base as shard name's base if the stored one still has
// ETag etag ("": none), and makes it the view of the shard.
func (s *Store) putBase(ctx context.Context, name string, base *manifest.IndexShard, etag string) (shardView, error) {
	data, err := s.codec.EncodeIndexShard(shardKey(name), base)
	if err != nil {
		return shardView{}, err
	}
	etag, err = s.put(ctx, shardKey(name), data, putCond{ifMatch: etag, ifNoneMatch: etag == ""}, "application/zstd")
	if err != nil {
		return shardView{}, err
	}
	w := baseView(base, etag, base.Through)
	st := s.shardState(name)
	st.mu.Lock()
	if w.newer(st.view) {
		st.view, st.fresh = w, s.now()
	}
	st.mu.Unlock()
	return w, nil
}

// finishPurges finishes the purges cut short that the shards of the last
// reading ask for (Tombstones calls it: a sync lists them before it
// plans). A failure leaves the request for the next writer.
func (s *Store) finishPurges(ctx context.Context) {
	for _, name := range s.shardNames() {
		st := s.shardState(name)
		st.mu.Lock()
		v := st.view
		st.mu.Unlock()
		if v.purgePending() {
			_ = s.finishPurge(ctx, name, v)
		}
	}
}

// deleteDeltas deletes the deltas of shard name numbered up to through,
// found by listing: also those a writer wrote after an earlier purge had
// deleted them. Credentials that may not list delete them by number, from
// from (the first the base does not say are deleted) to through.
func (s *Store) deleteDeltas(ctx context.Context, name string, from, through int64) error {
	objects, _, err := s.b.list(ctx, "index/"+name+"/", "")
	keys := listedKeys(objects)
	if errors.Is(err, ErrPermission) {
		for n := max(from, 1); n <= through; n++ {
			if err := s.b.delete(ctx, deltaKey(name, n)); err != nil {
				return fmt.Errorf("purge index shard %s: %w", name, err)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("purge index shard %s: %w", name, err)
	}
	for _, k := range keys {
		n, err := strconv.ParseInt(strings.TrimSuffix(k[strings.LastIndexByte(k, '/')+1:], ".json.zst"), 10, 64)
		if err != nil || n > through {
			continue
		}
		if err := s.b.delete(ctx, k); err != nil {
			return fmt.Errorf("purge index shard %s: %w", name, err)
		}
	}
	return nil
}

// ensureFeature adds feature f to the marker's required features before
// the first write that needs it (If-Match on the marker; a lost race
// reads it again).
func (s *Store) ensureFeature(ctx context.Context, f string) error {
	if err := s.ensureMarker(ctx); err != nil {
		return err
	}
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	for attempt := 0; !slices.Contains(s.marker.Requires, f); attempt++ {
		if attempt >= s.maxAttempts {
			return fmt.Errorf("add %s to the format marker: too many concurrent updates", f)
		}
		up := s.marker.Require(f)
		etag, err := s.b.put(ctx, markerName, manifest.EncodeMarker(up), putCond{ifMatch: s.markerEtag}, "application/json")
		if err == nil {
			s.marker, s.markerEtag = up, etag
			return nil
		}
		if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			return fmt.Errorf("add %s to the format marker: %w", f, err)
		}
		data, etag, err := s.b.get(ctx, markerName, "")
		if err != nil {
			return fmt.Errorf("add %s to the format marker: %w", f, err)
		}
		m, err := manifest.DecodeMarker(data)
		if err != nil {
			return err
		}
		s.marker, s.markerEtag = m, etag
	}
	return nil
}
