package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
)

func sessionsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "sessions",
		Aliases:   []string{"ls"},
		Usage:     "list this project's sessions, newest first",
		UsageText: "panto sessions [--store SPEC] [--endpoint URL] [--all | --project PROJECT] [--limit N] [--json]",
		Description: `Lists the sessions of the current project, newest first: short id, last modified,
number of messages, model, and the title (panto title) or else the last prompt typed.
The project is the git repository panto runs in, known by its origin remote (so a
clone at another path, or on another machine, is the same project), else the work
tree's root, else the directory. --all lists every session, with a PROJECT column
(sessions that predate projects are "(no project)"); --project another project's.
--limit N shows the newest N (default 50; 0: every one), which on a bucket reads
one small object however many sessions it holds. --json adds the full id, the
project, the parent of a fork (panto fork) and the session's token totals.

Examples:
   panto sessions
   panto sessions --all
   panto sessions --all --limit 0 --json > every-session.json
   panto sessions --project git@github.com:team/proj.git
   panto sessions --json | jq '.[0].id'
   panto sessions --all --json | jq 'group_by(.project.key) | map({project: .[0].project.key, sessions: length})'
   panto sessions --json | jq '[.[].usage.output_tokens] | add'
   panto sessions --store s3://my-bucket/panto --endpoint http://127.0.0.1:9000`,
		Flags: append(storeFlags(false),
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "every session, of every project"},
			projectFlag(),
			&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Value: defaultSessionsLimit, Usage: "show the newest `N` (0: every one)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (full ids, times in RFC 3339)"},
		),
		Action: func(c *cli.Context) error {
			scope, err := listScope(c, e)
			if err != nil {
				return err
			}
			limit := c.Int("limit")
			if limit < 0 {
				return fmt.Errorf("sessions: --limit %d: give 0 (every session) or more", limit)
			}
			// The page of a project is the first read: a bucket's Open
			// prepares for it (backends.Options.PageAhead).
			st, _, err := openStore(c, func(o *backends.Options) {
				if limit > 0 {
					o.PageAhead = scope.in().Project
				}
			})
			if err != nil {
				return err
			}
			defer closeStore(c.Context, st, e.stderr)
			// One more than shown, to tell whether there are more.
			ask := limit
			if limit > 0 {
				ask = limit + 1
			}
			list, err := listNewestIn(c.Context, st, ask, scope.in(), scope.keep)
			if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
				return fmt.Errorf("list sessions: %w", err)
			}
			// Part of the catalog is damaged: list the rest, then say so.
			partial := err
			more := limit > 0 && len(list) > limit
			if more {
				list = list[:limit]
			}
			if err := printScoped(c, e, scope, list, st); err != nil {
				return err
			}
			if more && !c.Bool("json") {
				fmt.Fprintf(e.stderr, "the newest %d shown: --limit 0 lists every one\n", limit)
			}
			if partial != nil {
				return fmt.Errorf("list sessions: %w", partial)
			}
			return nil
		},
	}
}

// defaultSessionsLimit is how many sessions `panto sessions` shows
// unless told: a screenful, and what a bucket's index log answers alone.
const defaultSessionsLimit = 50

// sessionScope is which sessions a listing shows: every one, or one
// project's.
type sessionScope struct {
	all     bool
	project project.Found
}

// keep reports whether session s is in the scope (nil: every one is).
func (sc sessionScope) keep(s agent.SessionInfo) bool {
	return sc.all || sameProject(s.Project, sc.project)
}

// in is the project a listing of the scope asks the store for (the zero
// Found: every one).
func (sc sessionScope) in() project.Found {
	if sc.all {
		return project.Found{}
	}
	return sc.project
}

// listScope reads --all and --project; without either, the current
// project.
func listScope(c *cli.Context, e *env) (sessionScope, error) {
	switch {
	case c.Bool("all") && c.IsSet("project"):
		return sessionScope{}, errors.New("--all and --project both given: use one")
	case c.Bool("all"):
		return sessionScope{all: true}, nil
	case c.IsSet("project"):
		p, err := projectOf(c.String("project"))
		return sessionScope{project: p}, err
	}
	return sessionScope{project: currentProject(e.stderr)}, nil
}

// printSessions prints list as a table, or as JSON with --json.
func printSessions(c *cli.Context, e *env, list []agent.SessionInfo) error {
	if c.Bool("json") {
		out := make([]sessionJSON, 0, len(list))
		for _, s := range list {
			out = append(out, toSessionJSON(s))
		}
		return writeJSON(e.stdout, out)
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stderr, "no sessions yet")
		return nil
	}
	writeSessionTable(e.stdout, list, "")
	return nil
}

// printScoped prints shown, the sessions of a scope, as printSessions
// does, with a PROJECT column for --all, and says when the project has
// none but others of st do.
func printScoped(c *cli.Context, e *env, scope sessionScope, shown []agent.SessionInfo, st agent.SessionStore) error {
	if c.Bool("json") {
		return printSessions(c, e, shown)
	}
	home := e.getenv("HOME")
	if len(shown) == 0 && !scope.all {
		if others, _ := store.ListNewest(c.Context, st, 1, nil); len(others) > 0 {
			fmt.Fprintf(e.stderr, "no sessions of project %s yet (panto sessions --all lists every project's)\n", projectName(scope.project.Project, home))
			return nil
		}
	}
	if len(shown) == 0 {
		return printSessions(c, e, shown)
	}
	switch {
	case scope.all:
		writeAllSessions(e.stdout, shown, home)
	default:
		writeSessionTable(e.stdout, shown, "")
	}
	return nil
}

// sessionJSON is the --json shape of a session.
type sessionJSON struct {
	ID              string    `json:"id"`
	Created         time.Time `json:"created"`
	Modified        time.Time `json:"modified"`
	Messages        int       `json:"messages"`
	Title           string    `json:"title,omitempty"`
	LastUserMessage string    `json:"last_user_message,omitempty"`
	APIStyle        string    `json:"api_style,omitempty"`
	BaseURL         string    `json:"base_url,omitempty"`
	Model           string    `json:"model,omitempty"`
	Reasoning       string    `json:"reasoning,omitempty"`
	// Parent is the session this one was forked (or, by panto-sync's
	// keep-both, copied) from; ForkedAt how many of its messages a fork
	// took (absent for a copy of the whole).
	Parent   string    `json:"parent,omitempty"`
	ForkedAt int       `json:"forked_at,omitempty"`
	Usage    usageJSON `json:"usage"`
	// Project is where the session was started (absent for a session
	// that predates projects).
	Project *projectJSON `json:"project,omitempty"`
}

// projectJSON is a project for scripts: key is what makes sessions one
// project (the remote, else the work tree's root, else the directory).
type projectJSON struct {
	Key    string `json:"key"`
	Remote string `json:"remote,omitempty"`
	Root   string `json:"root,omitempty"`
	Path   string `json:"path,omitempty"`
	Dir    string `json:"dir,omitempty"`
}

func toProjectJSON(p agent.Project) *projectJSON {
	if p == (agent.Project{}) {
		return nil
	}
	return &projectJSON{Key: p.Key(), Remote: p.Remote, Root: p.Root, Path: p.Path, Dir: p.Dir}
}

// usageJSON is a token count for scripts: every field, zeros included.
type usageJSON struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

func toSessionJSON(s agent.SessionInfo) sessionJSON {
	return sessionJSON{
		ID: s.ID, Created: s.Created, Modified: s.Modified, Messages: s.MessageCount, Title: s.Title,
		LastUserMessage: s.LastUserMessage, APIStyle: string(s.APIStyle), BaseURL: s.BaseURL,
		Model: s.Model, Reasoning: string(s.Reasoning), Parent: s.Parent, ForkedAt: s.ForkedAt,
		Usage: usageJSON(s.Usage), Project: toProjectJSON(s.Project),
	}
}

// writeSessionTable prints sessions as a table; current is marked.
func writeSessionTable(w io.Writer, list []agent.SessionInfo, current string) {
	writeSessions(w, list, current, nil)
}

// writeSessions is writeSessionTable with a PROJECT column when project
// names each session's.
func writeSessions(w io.Writer, list []agent.SessionInfo, current string, project func(agent.SessionInfo) string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tMODIFIED\tMSGS\tMODEL\t"
	if project != nil {
		head += "PROJECT\t"
	}
	fmt.Fprintln(tw, head+"TITLE OR LAST PROMPT")
	for _, s := range list {
		mark := ""
		if s.ID == current {
			mark = "*"
		}
		proj := ""
		if project != nil {
			proj = clipProjectName(project(s), 40) + "\t"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t%s\t%s%s\n", shortID(s.ID), mark, s.Modified.Local().Format("2006-01-02 15:04"), s.MessageCount, s.Model, proj, clip(headline(s), 60))
	}
	tw.Flush()
}

// writeAllSessions prints list as panto sessions --all does, a PROJECT
// column naming each one's project (home spelled ~): for lists that span
// projects, as what prune and rm delete.
func writeAllSessions(w io.Writer, list []agent.SessionInfo, home string) {
	writeSessions(w, list, "", func(s agent.SessionInfo) string { return projectName(s.Project, home) })
}

// headline is what names a session for people: its title, else the last
// prompt typed in it.
func headline(s agent.SessionInfo) string {
	if s.Title != "" {
		return s.Title
	}
	return s.LastUserMessage
}
