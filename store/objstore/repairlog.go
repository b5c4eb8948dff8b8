package objstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// The index log's side of check and repair (format 4): the newest
// commit's recent sessions must be what a listing's first page shows.
// They may lag (a session's entry there shorter than the session, its
// summary older), never lie: every session they show exists, and every
// session they do not show is no newer than the oldest they do.

// checkRecent notes in report the sessions the newest commit's recent
// view gets wrong, against truth (every readable session), and "log" in
// report.Damaged when the commit does not decode.
func (s *Store) checkRecent(ctx context.Context, report *store.IndexReport, truth map[string]manifest.IndexEntry) error {
	if !s.indexLog() {
		return nil
	}
	_, c, _, err := s.readNewestCommit(ctx)
	if errors.Is(err, ErrCorrupt) {
		report.Damaged = append(report.Damaged, manifest.LogName)
		return nil
	}
	if err != nil {
		return err
	}
	report.Recent = wrongRecent(c, truth, report.Unreadable)
	return nil
}

// wrongRecent returns the sessions commit c's recent view (nil: no
// commit) shows though truth does not hold them, or hides though they
// are newer than the oldest it shows (or it says it holds every session:
// Complete). A view that is neither full nor complete lost sessions to
// deletions since it last dropped one for room: the older sessions it
// no longer shows are the full listing's, not wrong.
func wrongRecent(c *manifest.IndexShard, truth map[string]manifest.IndexEntry, unreadable map[string]error) []string {
	var recent map[string]manifest.IndexEntry
	if c != nil {
		recent = c.Recent
	}
	var wrong []string
	var oldest agent.SessionInfo
	first := true
	for id, e := range recent {
		if _, ok := truth[id]; !ok && unreadable[id] == nil {
			wrong = append(wrong, id)
			continue
		}
		if first || newerThan(oldest, e.Info) {
			oldest, first = e.Info, false
		}
	}
	complete := c != nil && c.Complete
	for id, t := range truth {
		if _, ok := recent[id]; ok {
			continue
		}
		if complete || first || newerThan(t.Info, oldest) {
			wrong = append(wrong, id)
		}
	}
	return wrong
}

// newerThan reports whether a lists before b, newest first.
func newerThan(a, b agent.SessionInfo) bool {
	if c := a.Modified.Compare(b.Modified); c != 0 {
		return c > 0
	}
	return a.ID < b.ID
}

// rebuildRecent writes a commit whose recent view is the newest sessions
// of truth, when the check found it wrong; a session written since the
// check keeps its place (only what truth contradicts is dropped).
//
// With unfolded entries it also takes the sessions whose partitions the
// repair rebuilt (unindexed, stale, orphaned) out of the Unfolded set:
// their partitions now hold what the sessions are, and an entry there
// that was wrong would otherwise still win over them.
func (s *Store) rebuildRecent(ctx context.Context, report *store.IndexReport, truth map[string]manifest.IndexEntry) error {
	fixed := map[string]bool{}
	if s.unfoldedIndex() {
		for _, list := range [][]string{report.Unindexed, report.Stale, report.Orphans} {
			for _, id := range list {
				fixed[id] = true
			}
		}
	}
	if !s.indexLog() || len(report.Recent) == 0 && len(fixed) == 0 && !slices.Contains(report.Damaged, manifest.LogName) {
		return nil
	}
	recent := map[string]manifest.IndexEntry{}
	for id, e := range truth {
		recent[id] = e
	}
	manifest.TrimRecent(recent)
	wrong := map[string]bool{}
	for _, id := range report.Recent {
		wrong[id] = true
	}
	drop := func(e manifest.IndexEntry) bool {
		_, live := truth[e.Info.ID]
		return wrong[e.Info.ID] && !live || fixed[e.Info.ID]
	}
	whole := len(truth) <= manifest.RecentSize && len(report.Unreadable) == 0
	if err := s.commitLog(ctx, logChanges{recent: recent}, drop, whole); err != nil {
		return fmt.Errorf("write the index log: %w", err)
	}
	report.Rebuilt = append(report.Rebuilt, manifest.LogName)
	return nil
}
