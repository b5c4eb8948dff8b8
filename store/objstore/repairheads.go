package objstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// Checking and rebuilding the project heads (heads.go) against the
// sessions, as repair.go does the partitions and repairlog.go the newest
// commit's recent view.

// listHeads returns the names of the heads the prefix holds.
func (s *Store) listHeads(ctx context.Context) ([]string, error) {
	objects, _, err := s.b.list(ctx, "index/head/", "")
	if err != nil {
		return nil, fmt.Errorf("list the project heads: %w", err)
	}
	var names []string
	for _, o := range objects {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.key, "index/head/"), ".json.zst")
		if ok && name != "" && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	return names, nil
}

// checkHeads notes in report.Heads each head that gets its project
// wrong against truth (every readable session): one that does not
// decode; holds a session that does not exist, or at a length the
// session does not reach; or lacks one of the newest manifest.HeadSize
// of its project that the newest commit c (nil: none) does not hold
// unfolded (a head takes a session when its partition does), counting
// in a project's the sessions of the directories it holds a trusted
// claim of. A prefix
// whose writers do not keep heads yet is not checked: repair gives it
// them.
func (s *Store) checkHeads(ctx context.Context, report *store.IndexReport, truth map[string]manifest.IndexEntry, c *manifest.IndexShard) error {
	if !s.headsIndex() {
		return nil
	}
	names, err := s.listHeads(ctx)
	if err != nil {
		return err
	}
	groups := map[string][]manifest.IndexEntry{}
	for _, e := range truth {
		for _, name := range headsKept(e.Info.Project, c) {
			groups[name] = append(groups[name], e)
		}
	}
	for name := range groups {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	// A project's head that holds a claim c vouches for (claims.go) is
	// read instead of the claimed directory's head: it must hold that
	// directory's sessions too.
	atDir := map[string][]manifest.IndexEntry{}
	for _, e := range truth {
		if e.Info.Project.OnlyDir() {
			name := keyHead(filepath.Clean(e.Info.Project.Dir))
			atDir[name] = append(atDir[name], e)
		}
	}
	wrong := make([]bool, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, name := range names {
		g.Go(func() error {
			v, err := s.readHead(gctx, name)
			if errors.Is(err, ErrCorrupt) {
				wrong[i] = true
				return nil
			}
			if err != nil {
				return err
			}
			group := groups[name]
			if v.doc != nil && c != nil {
				for root := range v.doc.Claimed {
					if trustsClaim(v.doc, root, c.ClaimsSince) {
						group = append(slices.Clip(group), atDir[root]...)
					}
				}
			}
			wrong[i] = headWrong(v.doc, group, truth, report.Unreadable, c)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, name := range names {
		if wrong[i] {
			report.Heads = append(report.Heads, name)
		}
	}
	slices.Sort(report.Heads)
	return nil
}

// headWrong reports whether head doc (nil: none) gets group, the
// sessions of its project, wrong (checkHeads). A head that is not
// Complete may lack sessions no newer than the oldest it holds (a
// deletion takes one out, and nothing brings back the one it had
// dropped for room).
func headWrong(doc *manifest.IndexShard, group []manifest.IndexEntry, truth map[string]manifest.IndexEntry, unreadable map[string]error, c *manifest.IndexShard) bool {
	var held map[string]manifest.IndexEntry
	complete := true
	if doc != nil {
		held, complete = doc.Sessions, doc.Complete
	}
	for id, e := range held {
		t, ok := truth[id]
		if !ok && unreadable[id] == nil || ok && e.Length > t.Length {
			return true
		}
	}
	if !complete && len(held) == 0 {
		return len(group) > 0
	}
	var floor time.Time
	if !complete {
		floor = oldestModified(held)
	}
	for _, e := range group {
		if _, ok := held[e.Info.ID]; ok {
			continue
		}
		if c != nil {
			if _, unfolded := c.Unfolded[e.Info.ID]; unfolded {
				continue
			}
		}
		if !complete && !e.Info.Modified.After(floor) {
			continue
		}
		return true
	}
	return false
}

// repairHeads rewrites every head from truth (rebuildHeads, exact), and
// the heads that hold no session any more, then requires
// manifest.FeatureIndexHeads: after a repair every project's page reads
// its head. Sessions that could not be read leave the heads partial (not
// Complete), and the feature unrequired when the prefix lacked it.
func (s *Store) repairHeads(ctx context.Context, report *store.IndexReport, truth map[string]manifest.IndexEntry) error {
	if !s.indexLog() {
		return nil
	}
	names, err := s.listHeads(ctx)
	if err != nil {
		return err
	}
	partial := len(report.Unreadable) > 0
	dirs, err := s.rebuildHeads(ctx, truth, partial, true, names)
	if err != nil {
		return fmt.Errorf("rebuild the project heads: %w", err)
	}
	for _, name := range report.Heads {
		report.Rebuilt = append(report.Rebuilt, headKey(name))
	}
	if dirs {
		if err := s.commitDirHead(ctx, truth); err != nil {
			return err
		}
	}
	if partial {
		return nil
	}
	return s.ensureFeature(ctx, manifest.FeatureIndexHeads)
}

// restoreDirFilter gives the index log a dir filter made from truth,
// every session of the index, and the directories' heads
// (rebuildDirKeyHeads), when the newest commit says the dirs head holds
// sessions but has no filter or does not say DirKeys (a panto that
// predates them wrote a commit since): until then every work tree's page
// reads the dirs head, and every directory's. Not a fault of the index,
// so no report names it.
func (s *Store) restoreDirFilter(ctx context.Context, truth map[string]manifest.IndexEntry) error {
	s.ilog.mu.Lock()
	last := s.ilog.last
	s.ilog.mu.Unlock()
	if !lacksDirIndex(last) {
		return nil
	}
	if err := s.rebuildDirKeyHeads(ctx, truth); err != nil {
		return err
	}
	return s.commitDirHead(ctx, truth)
}
