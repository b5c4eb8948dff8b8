package archive

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// Grouping says what a usage report sums by.
type Grouping string

const (
	// ByModel: per model, as each entry's wire named it.
	ByModel Grouping = "model"
	// ByProject: per project a session was started in (agent.Project.Key).
	ByProject Grouping = "project"
	// ByDay: per day an entry was written on (UsageQuery.Location's).
	ByDay Grouping = "day"
)

// UsageQuery is what a usage report sums.
type UsageQuery struct {
	// Since: only the entries written at or after it (zero: all).
	Since time.Time
	// By is the grouping (default ByModel).
	By Grouping
	// Location is the time zone of ByDay's days (nil: UTC).
	Location *time.Location
	// Sessions, when set, says which sessions are read (say, one
	// project's).
	Sessions func(agent.SessionInfo) bool
	// Project, when set, is the project a session of project p counts
	// in by project (nil: p): cmd/panto names a remote recorded through
	// an SSH host alias by its host (project.Aliases), so that a
	// repository's cost is one row.
	Project func(p agent.Project) agent.Project
	// Cost, when set, prices an answer its wire counted usage of
	// (package pricing), false when it has no price for the model: the
	// groups then sum Cost, and count the answers left unpriced.
	Cost func(id agent.WireIdentity, u agent.Usage) (usd float64, ok bool)
}

// GroupUsage is what one group (a model, a project, a day) cost.
type GroupUsage struct {
	// Key names the group: the model as the wire named it ("" when
	// entries name none), the project's key ("" for sessions without
	// one), or the day as 2006-01-02.
	Key string
	// APIStyle is, by model, the style the model was reached through
	// (the last one read, if several); Project, by project, the project
	// (of the newest session read of it).
	APIStyle agent.APIStyle
	Project  agent.Project
	// Sessions is the number of sessions it counts, Turns the number of
	// entries that carried usage.
	Sessions, Turns int
	Usage           agent.Usage
	// Cost is what the priced answers cost, in US dollars, and Unpriced
	// the number of answers whose model had no price (UsageQuery.Cost).
	Cost     float64
	Unpriced int

	unpricedModels map[string]bool
}

// UsageReport is the usage of a store's sessions: per group (by model
// and by project the costliest first when priced, UsageQuery.Cost, else
// most tokens first; by day the oldest day first), and in
// all (Total.Key empty, Total.Sessions the sessions with any usage
// counted).
type UsageReport struct {
	Groups []GroupUsage
	Total  GroupUsage
	// UnpricedModels are the models of the answers Cost had no price
	// for, in name order.
	UnpricedModels []string
}

// Total is the sum of the token counts of u.
func Total(u agent.Usage) int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.ReasoningTokens
}

// Usage sums the token usage of every entry of st written at or after
// q.Since, per q.By, a fork's copies of its parent's messages left out,
// and the lines a keep-both copy shares with its parent (parentLog).
// Only sessions modified since are read; a session's summary has its
// totals, but not per model, nor per turn: a session may change models,
// and a turn's time is in its line.
func Usage(ctx context.Context, st store.LogStore, q UsageQuery, o Options) (UsageReport, Stats, error) {
	if q.By == "" {
		q.By = ByModel
	}
	if q.Location == nil {
		q.Location = time.UTC
	}
	sessions, broken, err := listed(ctx, st, func(info agent.SessionInfo) bool {
		return (q.Since.IsZero() || !info.Modified.Before(q.Since)) && (q.Sessions == nil || q.Sessions(info))
	})
	if err != nil {
		return UsageReport{}, Stats{}, fmt.Errorf("usage: %w", err)
	}
	sum := usageSum{groups: map[string]*GroupUsage{}, unpriced: map[string]bool{}}
	holder := func(p agent.Project) agent.Project { return p }
	if q.By == ByProject {
		if q.Project != nil {
			for i := range sessions {
				sessions[i].Project = q.Project(sessions[i].Project)
			}
		}
		holder = projectHolder(sessions)
	}
	stats, err := eachLog(ctx, st, sessions, o,
		func(ctx context.Context, info agent.SessionInfo, r io.Reader) (map[string]*GroupUsage, error) {
			info.Project = holder(info.Project)
			return sessionUsage(ctx, st, info, r, q)
		},
		func(info agent.SessionInfo, per map[string]*GroupUsage) error {
			sum.add(info, per)
			return nil
		})
	stats.Skipped = append(broken, stats.Skipped...)
	if err != nil {
		return UsageReport{}, stats, fmt.Errorf("usage: %w", err)
	}
	return sum.report(q.By, q.Cost != nil), stats, nil
}

// projectHolder returns the project a session of project p counts in by
// project: p, or for a session that knows only its directory (imported
// from another agent's log, its directory gone from the disk when it was
// imported) the project of sessions that holds it (agent.Project.Holds:
// the deepest work tree), as --project counts it. Without it such
// sessions made a project of their own beside the repository's.
func projectHolder(sessions []agent.SessionInfo) func(agent.Project) agent.Project {
	var trees []agent.Project // one per root, the newest session's
	seen := map[string]bool{}
	for _, info := range sessions {
		if p := info.Project; p.Root != "" && !seen[p.Root] {
			seen[p.Root] = true
			trees = append(trees, p)
		}
	}
	return func(p agent.Project) agent.Project {
		if !p.OnlyDir() {
			return p
		}
		held := p
		for _, t := range trees {
			if t.Holds(p) && (held.Root == "" || len(t.Root) > len(held.Root)) {
				held = t
			}
		}
		return held
	}
}

// usageSum adds the sessions' usage up, group by group.
type usageSum struct {
	groups   map[string]*GroupUsage
	total    GroupUsage
	unpriced map[string]bool
}

func (s *usageSum) add(info agent.SessionInfo, per map[string]*GroupUsage) {
	if len(per) > 0 {
		s.total.Sessions++
	}
	for key, u := range per {
		g := s.groups[key]
		if g == nil {
			// Sessions come newest first: the group keeps the newest's project.
			g = &GroupUsage{Key: key, Project: u.Project}
			s.groups[key] = g
		}
		g.APIStyle = u.APIStyle
		g.Sessions++
		g.Turns += u.Turns
		g.Usage.Add(u.Usage)
		g.Cost += u.Cost
		g.Unpriced += u.Unpriced
		s.total.Turns += u.Turns
		s.total.Usage.Add(u.Usage)
		s.total.Cost += u.Cost
		s.total.Unpriced += u.Unpriced
		for m := range u.unpricedModels {
			s.unpriced[m] = true
		}
	}
}

func (s *usageSum) report(by Grouping, priced bool) UsageReport {
	r := UsageReport{Groups: make([]GroupUsage, 0, len(s.groups)), Total: s.total}
	for m := range s.unpriced {
		r.UnpricedModels = append(r.UnpricedModels, m)
	}
	slices.Sort(r.UnpricedModels)
	for _, g := range s.groups {
		r.Groups = append(r.Groups, *g)
	}
	slices.SortFunc(r.Groups, func(a, b GroupUsage) int {
		if by == ByDay {
			return cmp.Compare(a.Key, b.Key)
		}
		// What a model's token costs differs by a hundred times: priced,
		// the group that cost most comes first, not the one that counted
		// most tokens.
		if c := cmp.Compare(b.Cost, a.Cost); priced && c != 0 {
			return c
		}
		if c := cmp.Compare(Total(b.Usage), Total(a.Usage)); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return r
}

// sessionUsage sums one session's usage per group, through the summary
// scanner (no content is decoded).
func sessionUsage(ctx context.Context, st store.LogStore, info agent.SessionInfo, r io.Reader, q UsageQuery) (map[string]*GroupUsage, error) {
	per := map[string]*GroupUsage{}
	d := sessionlog.Decoder{Name: info.ID}
	messages := 0
	var parent *parentLog
	defer func() { parent.Close() }()
	err := sessionlog.ReadLines(r, func(line []byte, last bool) error {
		if last {
			return nil
		}
		if d.Line%256 == 255 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		header := d.Header == nil
		turn, ok, err := d.SummarizeTurn(line)
		if err != nil {
			return err
		}
		if header && d.Header != nil && d.Header.ForkedFrom != "" && d.Header.ForkedAt == 0 {
			if parent, err = openParent(ctx, st, d.Header.ForkedFrom); err != nil {
				return err
			}
		}
		if !ok {
			return nil
		}
		messages++
		// A fork starts with copies of its parent's first messages,
		// usage and all, and a copy panto-sync's keep-both made of a
		// diverged session with its parent's log up to where the two
		// parted: they are counted in the parent, where they were spent.
		shared, err := parent.next(line)
		if err != nil {
			return err
		}
		if messages <= d.Header.ForkedAt || shared || turn.Usage == nil || turn.TS.Before(q.Since) {
			return nil
		}
		var key string
		switch q.By {
		case ByProject:
			key = info.Project.Key()
		case ByDay:
			key = turn.TS.In(q.Location).Format(time.DateOnly)
		default:
			key = turn.Identity.Model
		}
		u := per[key]
		if u == nil {
			u = &GroupUsage{Key: key, Project: info.Project}
			per[key] = u
		}
		u.APIStyle = turn.Identity.APIStyle
		u.Turns++
		u.Usage.Add(*turn.Usage)
		if q.Cost != nil {
			if usd, ok := q.Cost(turn.Identity, *turn.Usage); ok {
				u.Cost += usd
			} else {
				u.Unpriced++
				if u.unpricedModels == nil {
					u.unpricedModels = map[string]bool{}
				}
				u.unpricedModels[turn.Identity.Model] = true
			}
		}
		return nil
	})
	return per, err
}

// parentLog is the log of the session a keep-both copy was made from
// (its header's forked_from, without forked_at: replica's fork.go), read
// beside the copy's, line for line, while the two are the same.
type parentLog struct {
	rc     io.ReadCloser
	br     *bufio.Reader
	parted bool
}

// openParent opens the log of session id, the parent of a keep-both
// copy, past its header. A parent deleted or gone is no parent (nil): the
// copy's turns are counted in the copy, since none are in the parent.
func openParent(ctx context.Context, st store.LogStore, id string) (*parentLog, error) {
	rc, _, err := st.ReadLog(ctx, id, 0)
	if errors.Is(err, agent.ErrSessionNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the session it was copied from, %s: %w", id, err)
	}
	p := &parentLog{rc: rc, br: bufio.NewReader(rc)}
	if _, err := p.br.ReadBytes('\n'); err != nil {
		p.parted = true // no header: nothing to share
	}
	return p, nil
}

// next reports whether line, the copy's next message line, is the
// parent's next one too, every line before it having been the same.
func (p *parentLog) next(line []byte) (bool, error) {
	if p == nil || p.parted {
		return false, nil
	}
	theirs, err := p.br.ReadBytes('\n')
	switch {
	case errors.Is(err, io.EOF):
		p.parted = true // the parent ends here: the rest is the copy's
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the session it was copied from: %w", err)
	}
	if !bytes.Equal(theirs[:len(theirs)-1], line) {
		p.parted = true
	}
	return !p.parted, nil
}

// Close closes the parent's log (a nil parentLog has none).
func (p *parentLog) Close() {
	if p != nil {
		p.rc.Close()
	}
}
