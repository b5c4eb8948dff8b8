package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
)

// catalog is a generated local catalog (the directory panto-sync pushes)
// and what the operations need to know of it.
type catalog struct {
	dir   string
	bytes int64
	// medianBytes is the median session's log size.
	medianBytes int
	// someID is a session in the middle of the catalog: the one resolved
	// by prefix.
	someID string
	// newestID is the newest session: one `panto sessions` shows, which
	// a user resumes by prefix next.
	newestID string
	// project is the project of the newest session, the one panto runs
	// in (so that `panto sessions` and `panto -c` have sessions to show).
	project agent.Project
}

// projectRemote names project i of the generated team.
func projectRemote(i int) string { return fmt.Sprintf("bench.test/team/proj%02d", i) }

// writeCatalog writes n sessions into dir, each grown until its log
// passes a log-normal target around sessionBytes (a session's last turn
// overshoots it: sessionBytes 1500 gives a median near 2.7 KB and a mean
// near 7.5 KB), spread round-robin over projects
// projects and started 7 minutes apart, the newest last: a team's archive
// in panto's real line format (sessiongen).
func writeCatalog(dir string, n, projects, sessionBytes int, seed uint64) (catalog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return catalog{}, err
	}
	g := sessiongen.New(seed)
	c := catalog{dir: dir}
	start := time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)
	sizes := make([]int, 0, n)
	for i := 0; i < n; i++ {
		p := agent.Project{Remote: projectRemote(i % projects), Root: fmt.Sprintf("/home/dev/src/proj%02d", i%projects)}
		p.Dir = p.Root
		id := fmt.Sprintf("%016x%016x", g.Rand().Uint64(), g.Rand().Uint64())
		target := int(math.Exp(g.Rand().NormFloat64()*0.7) * float64(sessionBytes))
		data, err := g.SessionIn(p, id, target, start.Add(time.Duration(i)*7*time.Minute))
		if err != nil {
			return c, fmt.Errorf("generate session %d: %w", i, err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), data, 0o644); err != nil {
			return c, err
		}
		c.bytes += int64(len(data))
		sizes = append(sizes, len(data))
		if i == n/2 {
			c.someID = id
		}
		c.project, c.newestID = p, id
	}
	slices.Sort(sizes)
	c.medianBytes = sizes[n/2]
	return c, nil
}

// makeProjectDir makes dir a git work tree whose origin is remote (the
// files internal/project reads: no git binary needed), so that panto run
// in it is in that project.
func makeProjectDir(dir, remote string) error {
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf("[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = https://%s.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", remote)
	if err := os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".git", "config"), []byte(cfg), 0o644)
}
