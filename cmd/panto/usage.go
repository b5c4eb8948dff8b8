package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/archive"
)

func usageCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "usage",
		Usage:     "tokens per model, project or day",
		UsageText: "panto usage [--store SPEC] [--endpoint URL] [--by model|project|day] [--since DURATION] [--project PROJECT] [--json]",
		Description: `Sums the tokens every answer of the store's sessions cost, per model (--by model,
the default), per project the session was started in (--by project: the git
repository by its origin remote, else the directory) or per day (--by day, in the
local time zone): input, output, cache reads and writes, reasoning, as the
providers reported them. With --since, only the answers of that last stretch of
time; with --project, only that project's sessions. The messages a fork copied from
its parent count once, in the parent, as do those a copy panto-sync's keep-both
made of a diverged session shares with its parent. The sessions' own totals are in
panto sessions --json and at the end of panto show.

Examples:
   panto usage
   panto usage --by project --since 30d
   panto usage --by day --since 1w --project .
   panto usage --since 24h
   panto usage --since 30d --json | jq '.total.output_tokens'
   panto usage --by project --json | jq -r '.projects[] | "\(.project)\t\(.output_tokens)"'`,
		Flags: append(storeFlags(false),
			&cli.StringFlag{Name: "by", Value: string(archive.ByModel), Usage: "sum per `WHAT`: model, project or day"},
			&cli.StringFlag{Name: "since", Usage: "only the answers of the last `DURATION`: days (30d), weeks (2w), hours (24h) or any Go duration (90m)"},
			projectFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON: per group, and the total"},
		),
		Action: func(c *cli.Context) error { return usage(c, e) },
	}
}

// usage is panto usage: the query, the sums, then what was read.
func usage(c *cli.Context, e *env) error {
	q, err := usageQuery(c)
	if err != nil {
		return err
	}
	st, err := openLogStore(c)
	if err != nil {
		return err
	}
	defer closeStore(c.Context, st, e.stderr)
	report, stats, err := archive.Usage(c.Context, st, q, archive.Options{})
	if err != nil {
		return err
	}
	for _, skipped := range stats.Skipped {
		fmt.Fprintf(e.stderr, "panto: warning: not counted: %s\n", oneLine(skipped.Error()))
	}
	if c.Bool("json") {
		return writeJSON(e.stdout, toUsageReportJSON(q, report, stats))
	}
	if len(report.Groups) == 0 {
		fmt.Fprintf(e.stderr, "no token usage recorded%s (%s read)\n", sinceText(q.Since), plural(stats.Sessions, "session"))
		return nil
	}
	writeUsageTable(e.stdout, q.By, report, e.getenv("HOME"))
	fmt.Fprintf(e.stderr, "%s%s: %s read in %s\n", plural(stats.Sessions, "session"), sinceText(q.Since), byteSize(stats.Bytes), stats.Elapsed.Round(time.Millisecond))
	return nil
}

// usageQuery reads --by, --since and --project.
func usageQuery(c *cli.Context) (archive.UsageQuery, error) {
	q := archive.UsageQuery{By: archive.Grouping(c.String("by")), Location: time.Local}
	switch q.By {
	case archive.ByModel, archive.ByProject, archive.ByDay:
	default:
		return q, fmt.Errorf("usage: --by %q: want model, project or day", c.String("by"))
	}
	if c.IsSet("since") {
		// As prune's --older-than: a month of cost is --since 30d.
		d, err := parseAge(c.String("since"))
		if err != nil {
			return q, fmt.Errorf("usage: --since: %w", err)
		}
		q.Since = time.Now().Add(-d)
	}
	if c.IsSet("project") {
		p, err := projectOf(c.String("project"))
		if err != nil {
			return q, fmt.Errorf("usage: %w", err)
		}
		q.Sessions = func(info agent.SessionInfo) bool { return sameProject(info.Project, p) }
	}
	return q, nil
}

// writeUsageTable prints a report as columns: the group, then the counts.
func writeUsageTable(w io.Writer, by archive.Grouping, report archive.UsageReport, home string) {
	rows := [][]string{{strings.ToUpper(string(by)), "SESSIONS", "ANSWERS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "REASONING"}}
	row := func(name string, g archive.GroupUsage) {
		u := g.Usage
		rows = append(rows, []string{name, fmt.Sprint(g.Sessions), fmt.Sprint(g.Turns), thousands(u.InputTokens), thousands(u.OutputTokens),
			thousands(u.CacheReadTokens), thousands(u.CacheWriteTokens), thousands(u.ReasoningTokens)})
	}
	for _, g := range report.Groups {
		switch by {
		case archive.ByProject:
			row(projectName(g.Project, home), g)
		default:
			row(orDefault(g.Key, "(unnamed)"), g)
		}
	}
	if len(report.Groups) > 1 {
		row("total", report.Total)
	}
	writeColumns(w, rows)
}

func sinceText(since time.Time) string {
	if since.IsZero() {
		return ""
	}
	return " since " + since.Local().Format("2006-01-02 15:04")
}

// usageReportJSON is the --json shape of panto usage: the groups under
// models, projects or days, as --by says.
type usageReportJSON struct {
	By           string              `json:"by"`
	Since        *time.Time          `json:"since,omitempty"`
	Models       *[]modelUsageJSON   `json:"models,omitempty"`
	Projects     *[]projectUsageJSON `json:"projects,omitempty"`
	Days         *[]dayUsageJSON     `json:"days,omitempty"`
	Total        modelUsageJSON      `json:"total"`
	SessionsRead int                 `json:"sessions_read"`
	BytesRead    int64               `json:"bytes_read"`
}

// usageCountsJSON is what a group cost.
type usageCountsJSON struct {
	Sessions int `json:"sessions"`
	Answers  int `json:"answers"`
	usageJSON
}

type modelUsageJSON struct {
	Model    string `json:"model,omitempty"`
	APIStyle string `json:"api_style,omitempty"`
	usageCountsJSON
}

// projectUsageJSON is a project's usage: project is its key
// (agent.Project.Key), "" for the sessions that predate projects.
type projectUsageJSON struct {
	Project string `json:"project"`
	usageCountsJSON
}

type dayUsageJSON struct {
	Day string `json:"day"`
	usageCountsJSON
}

func countsJSON(g archive.GroupUsage) usageCountsJSON {
	return usageCountsJSON{Sessions: g.Sessions, Answers: g.Turns, usageJSON: usageJSON(g.Usage)}
}

func toUsageReportJSON(q archive.UsageQuery, report archive.UsageReport, stats archive.Stats) usageReportJSON {
	out := usageReportJSON{By: string(q.By), Total: modelUsageJSON{usageCountsJSON: countsJSON(report.Total)}, SessionsRead: stats.Sessions, BytesRead: stats.Bytes}
	if !q.Since.IsZero() {
		out.Since = &q.Since
	}
	models, projects, days := []modelUsageJSON{}, []projectUsageJSON{}, []dayUsageJSON{}
	for _, g := range report.Groups {
		switch q.By {
		case archive.ByProject:
			projects = append(projects, projectUsageJSON{Project: g.Key, usageCountsJSON: countsJSON(g)})
		case archive.ByDay:
			days = append(days, dayUsageJSON{Day: g.Key, usageCountsJSON: countsJSON(g)})
		default:
			models = append(models, modelUsageJSON{Model: g.Key, APIStyle: string(g.APIStyle), usageCountsJSON: countsJSON(g)})
		}
	}
	switch q.By {
	case archive.ByProject:
		out.Projects = &projects
	case archive.ByDay:
		out.Days = &days
	default:
		out.Models = &models
	}
	return out
}

// writeColumns prints rows as columns: the first left-aligned, the
// others (numbers) right-aligned.
func writeColumns(w io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
