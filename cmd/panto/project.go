package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
	"github.com/panto-dev/panto/store"
)

// This file is what the commands share about projects: the current one
// (where panto runs), the --project flag, and how a list of sessions is
// narrowed to a project or ordered by it. A project is compared by
// agent.Project.Key: the normalised origin remote when there is one, so
// that a clone at another path, or on another machine, is the same
// project. A project asked about is a project.Found: a remote through an
// SSH host alias is named by its host, and the sessions an earlier panto
// recorded under the alias's spelling are the project's too.

// noProject names the project of a session that predates projects.
const noProject = "(no project)"

// currentProject is the project of the working directory. A directory
// that cannot be found is not an error: panto runs, and its sessions
// record no project (warn says why).
func currentProject(warn io.Writer) project.Found {
	wd, err := os.Getwd()
	if err == nil {
		var p project.Found
		if p, err = project.Find(wd); err == nil {
			return p
		}
	}
	fmt.Fprintf(warn, "panto: warning: no project: %s\n", oneLine(err.Error()))
	return project.Found{}
}

// projectFlag is --project of the commands that filter by project.
func projectFlag() cli.Flag {
	return &cli.StringFlag{Name: "project", Usage: "only the sessions of `PROJECT`: . (the current directory's), a directory, or a git remote in any spelling (git@host:team/proj.git, host/team/proj)"}
}

// projectOf reads a --project value: "." or a directory is the project
// found there; another absolute path a directory that is gone; anything
// else a git remote, in any spelling (host/team/proj as panto shows it).
func projectOf(value string) (project.Found, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return project.Found{}, errors.New("--project: give ., a directory or a git remote")
	}
	if fi, err := os.Stat(v); err == nil && fi.IsDir() {
		p, err := project.Find(v)
		if err != nil {
			return project.Found{}, fmt.Errorf("--project %s: %w", value, err)
		}
		return p, nil
	}
	if filepath.IsAbs(v) {
		// A directory that is gone (a local remote is file:///PATH).
		return project.Found{Project: agent.Project{Dir: filepath.Clean(v)}}, nil
	}
	if p, ok := project.FindRemote(v); ok {
		return p, nil
	}
	// A remote as panto shows it (host/team/proj).
	if remote, ok := project.NormalizeRemote("https://" + v); ok {
		return project.Found{Project: agent.Project{Remote: remote}}, nil
	}
	return project.Found{}, fmt.Errorf("--project %q: not a directory nor a git remote: give ., a directory, or a remote such as host/team/proj", value)
}

// sameProject reports whether a session of project a belongs to project
// b (project.Found.Holds).
func sameProject(a agent.Project, b project.Found) bool { return b.Holds(a) }

// inProject returns the sessions of list that belong to p, in order.
func inProject(list []agent.SessionInfo, p project.Found) []agent.SessionInfo {
	var out []agent.SessionInfo
	for _, s := range list {
		if sameProject(s.Project, p) {
			out = append(out, s)
		}
	}
	return out
}

// projectFirst orders list with p's sessions first, each part in the
// order it had.
func projectFirst(list []agent.SessionInfo, p project.Found) []agent.SessionInfo {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b agent.SessionInfo) int {
		ina, inb := sameProject(a.Project, p), sameProject(b.Project, p)
		switch {
		case ina && !inb:
			return -1
		case inb && !ina:
			return 1
		}
		return 0
	})
	return out
}

// projectName is how a project is shown: its key, a home directory
// spelled ~; noProject for none.
func projectName(p agent.Project, home string) string {
	k := p.Key()
	switch {
	case k == "":
		return noProject
	case p.Remote == "" && home != "" && (k == home || strings.HasPrefix(k, home+string(filepath.Separator))):
		return "~" + k[len(home):]
	}
	return k
}

// latestInProject is the most recently modified session of project p
// (-c): from the newest sessions when the store keeps them apart (a
// bucket's index log: one small object), else one listing, as Latest
// costs.
func latestInProject(ctx context.Context, st agent.SessionStore, p project.Found) (*agent.Session, error) {
	mine, err := listNewestIn(ctx, st, 1, p, nil)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return nil, err
	}
	if len(mine) == 0 {
		if err != nil {
			return nil, err // what is not listed may be it
		}
		return nil, fmt.Errorf("%w: no session of project %s", agent.ErrSessionNotFound, projectName(p.Project, ""))
	}
	return &agent.Session{Info: mine[0], Store: st}, nil
}

// listNewestIn is store.ListNewestIn of project p, and of the spelling
// of its remote through an SSH host alias when it has one: the store
// keeps each in its own place (a bucket's project heads, by key), so the
// two are listed at once and merged, newest first.
func listNewestIn(ctx context.Context, st agent.SessionStore, limit int, p project.Found, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	if p.Spelled == (agent.Project{}) {
		return store.ListNewestIn(ctx, st, limit, p.Project, keep)
	}
	var spelled []agent.SessionInfo
	var spelledErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		spelled, spelledErr = store.ListNewestIn(ctx, st, limit, p.Spelled, keep)
	}()
	list, err := store.ListNewestIn(ctx, st, limit, p.Project, keep)
	<-done
	for _, e := range []error{err, spelledErr} {
		if e != nil && !errors.Is(e, agent.ErrIncompleteList) {
			return nil, e
		}
	}
	seen := make(map[string]bool, len(list))
	for _, s := range list {
		seen[s.ID] = true
	}
	for _, s := range spelled {
		if !seen[s.ID] {
			list = append(list, s)
		}
	}
	slices.SortStableFunc(list, func(a, b agent.SessionInfo) int { return b.Modified.Compare(a.Modified) })
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	return list, cmp.Or(err, spelledErr)
}

// shortProjectName is a project's last component (proj of
// host/team/proj), for narrow columns; "" for no project.
func shortProjectName(p agent.Project) string {
	k := strings.TrimRight(p.Key(), "/")
	return k[strings.LastIndexByte(k, '/')+1:]
}

// clipProjectName shortens a project's name to n runes from its start,
// where a path says least: "…/work/proj".
func clipProjectName(name string, n int) string {
	r := []rune(strings.Join(strings.Fields(name), " "))
	if len(r) <= n {
		return string(r)
	}
	return "…" + string(r[len(r)-n+1:])
}

// projectLine says where a session was started (panto show): the
// project, and the directory when the project is a remote.
func projectLine(p agent.Project, home string) string {
	line := "project " + projectName(p, home)
	if p.Remote != "" && p.Dir != "" {
		line += ", started in " + projectName(agent.Project{Dir: p.Dir}, home)
	}
	return line
}
