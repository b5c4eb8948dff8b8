package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/archive"
	"github.com/panto-dev/panto/internal/pricing"
	"github.com/panto-dev/panto/internal/project"
)

func usageCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "usage",
		Usage:     "tokens per model, project or day, and what they cost",
		UsageText: "panto usage [--store SPEC] [--endpoint URL] [--by model|project|day] [--since DURATION] [--project PROJECT] [--prices FILE] [--json]",
		Description: `Sums the tokens every answer of the store's sessions cost, per model (--by model,
the default), per project the session was started in (--by project: the git
repository by its origin remote, else the directory; a session imported with its
directory alone counts in the repository whose work tree holds it, as --project
counts it) or per day (--by day, in the local time zone): input, output, cache
reads and writes, reasoning, as the providers reported them. With --since, only the answers of that last stretch of
time; with --project, only that project's sessions. The messages a fork copied from
its parent count once, in the parent, as do those a copy panto-sync's keep-both
made of a diverged session shares with its parent. The sessions' own totals are in
panto sessions --json and at the end of panto show. A read that runs for more than a
second on a terminal shows how many sessions it has read, in a bar on stderr.

With a price table (--prices FILE, PANTO_PRICES, else $XDG_CONFIG_HOME/panto/prices.json
or ~/.config/panto/prices.json when it is there) a COST column says what each group
cost in US dollars, every answer priced by its own model as its provider counted the
tokens. The table is LiteLLM's model_prices_and_context_window.json, whole or the
models you use (dollars per token: input_cost_per_token, output_cost_per_token,
cache_read_input_token_cost, cache_creation_input_token_cost); panto builds no prices
in, since they change. Answers of a model the table lacks are marked * and named.
Models and projects come the costliest first when priced, else most tokens first;
days the oldest first.

Examples:
   panto usage
   panto usage --by project --since 30d
   panto usage --by day --since 1w --project .
   panto usage --since 24h
   panto usage --since 30d --json | jq '.total.output_tokens'
   panto usage --by project --json | jq -r '.projects[] | "\(.project)\t\(.output_tokens)"'
   panto usage --by project --since 30d --prices ~/.config/panto/prices.json   a month's cost per project
   curl -o ~/.config/panto/prices.json https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json`,
		Flags: append(storeFlags(false),
			&cli.StringFlag{Name: "by", Value: string(archive.ByModel), Usage: "sum per `WHAT`: model, project or day"},
			&cli.StringFlag{Name: "since", Usage: "only the answers of the last `DURATION`: days (30d), weeks (2w), hours (24h) or any Go duration (90m)"},
			projectFlag(),
			&cli.StringFlag{Name: "prices", EnvVars: []string{"PANTO_PRICES"}, Usage: "price the answers with the table `FILE` (LiteLLM's JSON; default: $XDG_CONFIG_HOME/panto/prices.json when it is there)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON: per group, and the total"},
		),
		Action: func(c *cli.Context) error {
			defer paceReading(c.Context)()
			return usage(c, e)
		},
	}
}

// usage is panto usage: the query, the sums, then what was read.
func usage(c *cli.Context, e *env) error {
	q, err := usageQuery(c)
	if err != nil {
		return err
	}
	prices, pricesPath, err := loadPrices(c, e.getenv)
	if err != nil {
		return err
	}
	if prices != nil {
		q.Cost = func(id agent.WireIdentity, u agent.Usage) (float64, bool) {
			p, ok := prices.Lookup(id.Model, id.APIStyle)
			return p.Cost(id.APIStyle, u), ok
		}
	}
	st, err := openLogStore(c)
	if err != nil {
		return err
	}
	defer closeStore(c.Context, st, e.stderr)
	bar := newReadProgress(e, "usage", c.Bool("json"))
	opts := archiveOptions(c)
	opts.Progress = bar.progress()
	report, stats, err := archive.Usage(c.Context, st, q, opts)
	bar.done()
	if err != nil {
		return err
	}
	for _, skipped := range stats.Skipped {
		fmt.Fprintf(e.stderr, "panto: warning: not counted: %s\n", oneLine(skipped.Error()))
	}
	if c.Bool("json") {
		return writeJSON(e.stdout, toUsageReportJSON(q, report, stats, prices != nil))
	}
	if len(report.Groups) == 0 {
		fmt.Fprintf(e.stderr, "no token usage recorded%s (%s read)\n", sinceText(q.Since), plural(stats.Sessions, "session"))
		return nil
	}
	writeUsageTable(e.stdout, q.By, report, e.getenv("HOME"), prices != nil)
	if len(report.UnpricedModels) > 0 {
		fmt.Fprintf(e.stderr, "* %s of %s not in COST: %s has no price for %s; add them to it\n", plural(report.Total.Unpriced, "answer"), plural(len(report.UnpricedModels), "model"), pricesPath, quotedList(report.UnpricedModels))
	}
	fmt.Fprintf(e.stderr, "%s%s: %s read in %s\n", plural(stats.Sessions, "session"), sinceText(q.Since), byteSize(stats.Bytes), stats.Elapsed.Round(time.Millisecond))
	return nil
}

// usageQuery reads --by, --since and --project.
func usageQuery(c *cli.Context) (archive.UsageQuery, error) {
	// A remote an earlier panto recorded through an SSH host alias
	// counts in the project of the host (project.Aliases).
	q := archive.UsageQuery{By: archive.Grouping(c.String("by")), Location: time.Local, Project: new(project.Aliases).Resolve}
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

// writeUsageTable prints a report as columns: the group, then the
// counts, then (priced) the cost.
func writeUsageTable(w io.Writer, by archive.Grouping, report archive.UsageReport, home string, priced bool) {
	rows := [][]string{{strings.ToUpper(string(by)), "SESSIONS", "ANSWERS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "REASONING"}}
	if priced {
		rows[0] = append(rows[0], "COST")
	}
	row := func(name string, g archive.GroupUsage) {
		u := g.Usage
		r := []string{name, fmt.Sprint(g.Sessions), fmt.Sprint(g.Turns), thousands(u.InputTokens), thousands(u.OutputTokens),
			thousands(u.CacheReadTokens), thousands(u.CacheWriteTokens), thousands(u.ReasoningTokens)}
		if priced {
			r = append(r, costText(g))
		}
		rows = append(rows, r)
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

// costText is a group's cost in dollars, to the cent, marked * when
// answers of it had no price.
func costText(g archive.GroupUsage) string {
	cents := int64(math.Round(g.Cost * 100))
	s := fmt.Sprintf("$%s.%02d", thousands(cents/100), cents%100)
	if g.Cost > 0 && cents == 0 {
		s = "<$0.01"
	}
	if g.Unpriced > 0 {
		s += "*"
	}
	return s
}

// loadPrices reads the price table: --prices (PANTO_PRICES), else the
// one in panto's configuration directory when it is there; nil without
// one. It returns the path it read.
func loadPrices(c *cli.Context, getenv func(string) string) (*pricing.Table, string, error) {
	path := c.String("prices")
	if path == "" {
		dir := getenv("XDG_CONFIG_HOME")
		if dir == "" || !filepath.IsAbs(dir) {
			home := getenv("HOME")
			if home == "" {
				return nil, "", nil
			}
			dir = filepath.Join(home, ".config")
		}
		path = filepath.Join(dir, "panto", "prices.json")
		if _, err := os.Stat(path); err != nil {
			return nil, "", nil
		}
	}
	t, err := pricing.Load(path)
	if err != nil {
		return nil, "", fmt.Errorf("usage: %w: give --prices a table of LiteLLM's format (panto usage --help)", err)
	}
	return t, path, nil
}

// quotedList is names, each quoted, joined with commas.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
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
	// UnpricedModels, priced, are the models the table has no price for.
	UnpricedModels *[]string `json:"unpriced_models,omitempty"`
}

// usageCountsJSON is what a group cost.
type usageCountsJSON struct {
	Sessions int `json:"sessions"`
	Answers  int `json:"answers"`
	usageJSON
	// CostUSD and UnpricedAnswers are there when a price table was read.
	CostUSD         *float64 `json:"cost_usd,omitempty"`
	UnpricedAnswers *int     `json:"unpriced_answers,omitempty"`
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

func toUsageReportJSON(q archive.UsageQuery, report archive.UsageReport, stats archive.Stats, priced bool) usageReportJSON {
	countsJSON := func(g archive.GroupUsage) usageCountsJSON {
		c := usageCountsJSON{Sessions: g.Sessions, Answers: g.Turns, usageJSON: usageJSON(g.Usage)}
		if priced {
			cost, unpriced := g.Cost, g.Unpriced
			c.CostUSD, c.UnpricedAnswers = &cost, &unpriced
		}
		return c
	}
	out := usageReportJSON{By: string(q.By), Total: modelUsageJSON{usageCountsJSON: countsJSON(report.Total)}, SessionsRead: stats.Sessions, BytesRead: stats.Bytes}
	if priced {
		unpriced := append([]string{}, report.UnpricedModels...)
		out.UnpricedModels = &unpriced
	}
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
