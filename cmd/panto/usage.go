package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/archive"
)

func usageCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "usage",
		Usage:     "tokens per model",
		UsageText: "panto usage [--store SPEC] [--endpoint URL] [--since DURATION] [--json]",
		Description: `Sums the tokens every answer of the store's sessions cost, per model: input,
output, cache reads and writes, reasoning, as the providers reported them. With
--since, only the answers of that last stretch of time. The sessions' own totals
are in panto sessions --json and at the end of panto show.

Examples:
   panto usage
   panto usage --since 24h
   panto usage --since 720h --json | jq '.total.output_tokens'`,
		Flags: append(storeFlags(false),
			&cli.DurationFlag{Name: "since", Usage: "only the answers of the last `DURATION` (e.g. 24h, 90m)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON: per model, and the total"},
		),
		Action: func(c *cli.Context) error {
			if c.Duration("since") < 0 {
				return fmt.Errorf("usage: --since %s: give a positive duration, e.g. 24h", c.Duration("since"))
			}
			st, err := openLogStore(c)
			if err != nil {
				return err
			}
			var since time.Time
			if d := c.Duration("since"); d > 0 {
				since = time.Now().Add(-d)
			}
			report, stats, err := archive.UsageByModel(c.Context, st, since, archive.Options{})
			if err != nil {
				return err
			}
			models, total := report.Models, report.Total
			for _, skipped := range stats.Skipped {
				fmt.Fprintf(e.stderr, "panto: warning: not counted: %s\n", oneLine(skipped.Error()))
			}
			if c.Bool("json") {
				out := usageReportJSON{Models: []modelUsageJSON{}, Total: toModelUsageJSON(total), SessionsRead: stats.Sessions, BytesRead: stats.Bytes}
				if !since.IsZero() {
					out.Since = &since
				}
				for _, m := range models {
					out.Models = append(out.Models, toModelUsageJSON(m))
				}
				return writeJSON(e.stdout, out)
			}
			if len(models) == 0 {
				fmt.Fprintf(e.stderr, "no token usage recorded%s (%s read)\n", sinceText(since), plural(stats.Sessions, "session"))
				return nil
			}
			rows := [][]string{{"MODEL", "SESSIONS", "ANSWERS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "REASONING"}}
			row := func(name string, m archive.ModelUsage) {
				u := m.Usage
				rows = append(rows, []string{name, fmt.Sprint(m.Sessions), fmt.Sprint(m.Turns), thousands(u.InputTokens), thousands(u.OutputTokens),
					thousands(u.CacheReadTokens), thousands(u.CacheWriteTokens), thousands(u.ReasoningTokens)})
			}
			for _, m := range models {
				row(orDefault(m.Model, "(unnamed)"), m)
			}
			if len(models) > 1 {
				row("total", total)
			}
			writeColumns(e.stdout, rows)
			fmt.Fprintf(e.stderr, "%s%s: %s read in %s\n", plural(stats.Sessions, "session"), sinceText(since), byteSize(stats.Bytes), stats.Elapsed.Round(time.Millisecond))
			return nil
		},
	}
}

func sinceText(since time.Time) string {
	if since.IsZero() {
		return ""
	}
	return " since " + since.Local().Format("2006-01-02 15:04")
}

// usageReportJSON is the --json shape of panto usage.
type usageReportJSON struct {
	Since        *time.Time       `json:"since,omitempty"`
	Models       []modelUsageJSON `json:"models"`
	Total        modelUsageJSON   `json:"total"`
	SessionsRead int              `json:"sessions_read"`
	BytesRead    int64            `json:"bytes_read"`
}

type modelUsageJSON struct {
	Model    string `json:"model,omitempty"`
	APIStyle string `json:"api_style,omitempty"`
	Sessions int    `json:"sessions"`
	Answers  int    `json:"answers"`
	usageJSON
}

func toModelUsageJSON(m archive.ModelUsage) modelUsageJSON {
	return modelUsageJSON{Model: m.Model, APIStyle: string(m.APIStyle), Sessions: m.Sessions, Answers: m.Turns, usageJSON: usageJSON(m.Usage)}
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
