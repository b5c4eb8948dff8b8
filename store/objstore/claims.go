package objstore

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
)

// Claims (docs/DESIGN.md §P3, "Claims"): the page of a work tree whose
// root holds sessions that know only their directory (another agent's,
// imported on a machine without the tree, or panto's from before `git
// init`) read the root's head beside the project's, a fifth request. A
// writer in the tree, folding one of its project's sessions, claims the
// root's head for its project's: it names the project's head in the
// root's (IndexShard.Claims), with If-Match, then copies what the root's
// head holds into the project's and records the claim there
// (IndexShard.Claimed), then says so in its commit's dir filter
// (manifest.AddClaimTo). From the claim on, every writer that puts a
// session in the root's head puts it in the claimers' heads too, before
// its commit (claimantBatches), so the project's head holds every
// session the root's does, and the page reads it alone: four requests.
// A panto that predates claims does not; its commit drops ClaimsSince,
// so the next one says a later number and every claim recorded before
// is not trusted until a writer claims again.

// maxClaims bounds the projects that may claim one directory's head
// (work trees rooted there over the years, with other remotes): each is
// a head more that a write of the directory's sessions writes.
const maxClaims = 8

// claimWanted is a work tree's root whose head the head of the tree's
// project may claim.
type claimWanted struct {
	key  string // the project's Key
	root string
}

// wantClaim notes, for the next write of the heads, that project p's
// head may claim the head of p's work tree's root (claimRoots decides).
// Callers hold hs.mu.
func (hs *headState) wantClaim(p agent.Project) {
	key := p.Key()
	if p.Root == "" || key == "" || keyHead(key) == keyHead(p.Root) {
		return // no tree, or the tree's root is its Key: one head
	}
	if hs.claims == nil {
		hs.claims = map[string]claimWanted{}
	}
	hs.claims[keyHead(key)+" "+keyHead(p.Root)] = claimWanted{key: key, root: p.Root}
}

// claimDue names the head of project p's work tree's root when the
// newest commit this Store read says that head may hold sessions that
// know only their directory and no claim of it by p's head: the append
// reads it ahead, for the claim (claimRoots). "" otherwise.
func (s *Store) claimDue(p agent.Project) string {
	if p.Root == "" || p.Key() == "" || keyHead(p.Key()) == keyHead(p.Root) {
		return ""
	}
	s.ilog.mu.Lock()
	last := s.ilog.last
	s.ilog.mu.Unlock()
	if !rootHeadHolds(last, p.Root) || manifest.DirFilterMayHoldClaim(last.DirFilter, p.Root, p.Key()) {
		return ""
	}
	return keyHead(p.Root)
}

// rootHeadHolds reports whether commit c (nil: none) says the head of
// directory root may hold sessions that know only their directory, and
// is the head a work tree's page would read for those at its root
// (DirKeys): the head a claim is for.
func rootHeadHolds(c *manifest.IndexShard, root string) bool {
	return c != nil && c.DirHead && c.DirKeys && manifest.DirFilterMayHoldAt(c.DirFilter, root)
}

// claimRoots writes the claims of claims (wantClaim's) that are due: for
// each tree's root that the newest commit says may hold sessions that
// know only their directory, and whose head the project's head (as
// read) holds no trusted claim of, it adds the project's head to the
// root's Claims, then queues in pending, for the project's head, what
// the root's head holds of those sessions, with the claim, and sets the
// claim's bits for the commit (with, when the root's head is not
// Complete, its floor: floorOf). A claim that fails is dropped: the
// claim is an economy for readers, and the next fold of the project's
// sessions tries again.
// The claims go in parallel (a sync's fold may write many projects'
// heads), each reading its project's head, which the write after it
// reads anyway: it waits for that reading (prefetched with an append).
func (s *Store) claimRoots(ctx context.Context, claims map[string]claimWanted, pending map[string]*headBatch) {
	var g errgroup.Group
	g.SetLimit(16)
	var mu sync.Mutex // guards pending
	for _, w := range claims {
		g.Go(func() error { s.claimRoot(ctx, w, pending, &mu); return nil })
	}
	_ = g.Wait()
}

func (s *Store) claimRoot(ctx context.Context, w claimWanted, pending map[string]*headBatch, mu *sync.Mutex) {
	s.ilog.mu.Lock()
	last, n := s.ilog.last, s.ilog.n
	s.ilog.mu.Unlock()
	if !rootHeadHolds(last, w.root) || last.Through != n {
		return
	}
	own, root := keyHead(w.key), keyHead(w.root)
	v, err := s.knownHead(ctx, own)
	if err != nil {
		return
	}
	// What the commit after n will say at best: a claim that holds
	// already needs nothing.
	if trustsClaim(v.doc, root, claimsSinceAfter(last, true, n+1)) {
		return
	}
	var claimed *manifest.IndexShard
	err = s.writeHead(ctx, root, func(doc *manifest.IndexShard, damaged bool) *manifest.IndexShard {
		var next *manifest.IndexShard
		if doc != nil {
			next = doc.Clone()
		} else {
			next = manifest.NewIndexShard(manifest.HeadName)
			next.Complete = s.headsIndex() && !damaged
		}
		claimed = nil
		if !slices.Contains(next.Claims, own) {
			if len(next.Claims) >= maxClaims {
				return next // unchanged: not written
			}
			next.Claims = append(next.Claims, own)
		}
		claimed = next
		return next
	})
	if err != nil || claimed == nil || !claimed.Complete && len(claimed.Sessions) == 0 {
		return // a head that says nothing of what it lacks vouches for nothing
	}
	// Every writer that puts a session in the root's head after the
	// claim puts it in ours too; what it held before, this copies. The
	// claim is as of commit n: a writer that predates claims and wrote
	// the root's head since commits after n, and ClaimsSince then says
	// so.
	mu.Lock()
	defer mu.Unlock()
	b := pending[own]
	if b == nil {
		b = newHeadBatch()
		pending[own] = b
	}
	for id, e := range claimed.Sessions {
		if !holdsOnlyDirAt(e, root) {
			continue
		}
		if old, ok := b.entries[id]; !ok || old.Length < e.Length {
			b.entries[id] = e
		}
	}
	for id, t := range claimed.Tombstones {
		b.buried[id] = t
		delete(b.entries, id)
	}
	b.mergeClaims(&headBatch{claimed: map[string]int64{root: n}, floor: floorOf(claimed)})
	hs := &s.heads
	hs.mu.Lock()
	if hs.claimBits == nil {
		hs.claimBits = manifest.NewDirFilter()
	}
	manifest.AddClaimTo(hs.claimBits, w.root, w.key)
	hs.mu.Unlock()
}

// holdsOnlyDirAt reports whether e is a session that knows only its
// directory, and that directory's head is name.
func holdsOnlyDirAt(e manifest.IndexEntry, name string) bool {
	p := e.Info.Project
	return p.OnlyDir() && keyHead(filepath.Clean(p.Dir)) == name
}

// claimantBatches is what the heads that claimed a head of written (as
// writeHeads wrote them from pending) take of what it took: the
// sessions of pending's batch that know only its directory, as the head
// holds them now (one it did not keep, deleted or dropped for room, is
// not copied), and its tombstones. A claimed head that is not Complete
// gives its claimers its floor (floorOf: they keep nothing older, so
// that what it lacks is older than what they hold), or, holding
// nothing, takes back their claim of it.
func claimantBatches(pending map[string]*headBatch, written map[string]*manifest.IndexShard) map[string]*headBatch {
	out := map[string]*headBatch{}
	for name, doc := range written {
		b := pending[name]
		if doc == nil || len(doc.Claims) == 0 || b == nil {
			continue
		}
		for _, claimer := range doc.Claims {
			fb := out[claimer]
			if fb == nil {
				fb = newHeadBatch()
			}
			for id := range b.entries {
				if e, ok := doc.Sessions[id]; ok && holdsOnlyDirAt(e, name) {
					fb.entries[id] = e
				}
			}
			for id, t := range b.buried {
				fb.buried[id] = t
			}
			if len(fb.entries) == 0 && len(fb.buried) == 0 {
				continue
			}
			switch {
			case doc.Complete:
			case len(doc.Sessions) == 0:
				// It says nothing of what it lacks: the claimer's head
				// cannot vouch for it, and readers read it again.
				fb.mergeClaims(&headBatch{unclaimed: map[string]bool{name: true}})
			default:
				fb.mergeClaims(&headBatch{floor: floorOf(doc)})
			}
			out[claimer] = fb
		}
	}
	return out
}

// floorOf is the floor a claimer's head takes from claimed head doc:
// none when doc is Complete, else its oldest session, no older than any
// it lacks.
func floorOf(doc *manifest.IndexShard) time.Time {
	if doc.Complete || len(doc.Sessions) == 0 {
		return time.Time{}
	}
	return oldestModified(doc.Sessions)
}

// claimsSinceAfter is the ClaimsSince of commit n, after prev (known as
// dirFilterAfter has it): prev's, when it says one; else n itself, since
// the writer of prev, or of one before it that nobody can read, may
// predate claims.
func claimsSinceAfter(prev *manifest.IndexShard, known bool, n int64) int64 {
	if known && prev != nil && prev.ClaimsSince > 0 {
		return prev.ClaimsSince
	}
	return n
}

// claimedRoot is, for the page of work tree p after commit c, the head
// of its root that c says p's head claimed (""), which headsFor leaves
// out: the page reads it only when p's head holds no claim of it that
// c vouches for (trustsClaim), one round trip later. A root whose
// sessions the dirs head serves the page anyway (one may be below the
// root) is not.
func claimedRoot(p agent.Project, c *manifest.IndexShard) string {
	if p.Root == "" || !rootHeadHolds(c, p.Root) || c.ClaimsSince == 0 {
		return ""
	}
	key, root := keyHead(p.Key()), keyHead(p.Root)
	if key == "" || key == root || manifest.DirFilterMayHoldBelow(c.DirFilter, p.Root) || !manifest.DirFilterMayHoldClaim(c.DirFilter, p.Root, p.Key()) {
		return ""
	}
	return root
}

// trustsClaim reports whether project head doc (nil: none) holds every
// session of directory head root that knows only its directory, for a
// reader of a commit whose ClaimsSince is since: it records a claim of
// root written as of a commit after which every writer honours claims.
func trustsClaim(doc *manifest.IndexShard, root string, since int64) bool {
	if doc == nil || since <= 0 {
		return false
	}
	at, ok := doc.Claimed[root]
	return ok && at+1 >= since
}
