package archive

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// ModelUsage is what one model cost over the sessions read.
type ModelUsage struct {
	// Model is the model as the wire named it ("" when entries name
	// none); APIStyle the style it was reached through (the last one
	// read, if several).
	Model    string
	APIStyle agent.APIStyle
	// Sessions is the number of sessions it served, Turns the number of
	// entries that carried usage.
	Sessions, Turns int
	Usage           agent.Usage
}

// UsageReport is the usage of a store's sessions: per model, most tokens
// first, and in all (Total.Model empty, Total.Sessions the sessions with
// any usage counted).
type UsageReport struct {
	Models []ModelUsage
	Total  ModelUsage
}

// Total is the sum of the token counts of u.
func Total(u agent.Usage) int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.ReasoningTokens
}

// UsageByModel sums the token usage of every entry of st written at or
// after since (the zero time: all), per model, most tokens first. Only
// sessions modified since are read; a session's summary has its totals,
// but not per model, nor per turn: a session may change models, and a
// turn's time is in its line.
func UsageByModel(ctx context.Context, st store.LogStore, since time.Time, o Options) (UsageReport, Stats, error) {
	sessions, broken, err := listed(ctx, st, func(info agent.SessionInfo) bool {
		return since.IsZero() || !info.Modified.Before(since)
	})
	if err != nil {
		return UsageReport{}, Stats{}, fmt.Errorf("usage: %w", err)
	}
	var report UsageReport
	byModel := map[string]*ModelUsage{}
	stats, err := eachLog(ctx, st, sessions, o,
		func(ctx context.Context, info agent.SessionInfo, r io.Reader) (map[string]*ModelUsage, error) {
			return sessionUsage(ctx, info, r, since)
		},
		func(_ agent.SessionInfo, per map[string]*ModelUsage) error {
			if len(per) > 0 {
				report.Total.Sessions++
			}
			for model, u := range per {
				sum := byModel[model]
				if sum == nil {
					sum = &ModelUsage{Model: model}
					byModel[model] = sum
				}
				sum.APIStyle = u.APIStyle
				sum.Sessions++
				sum.Turns += u.Turns
				sum.Usage.Add(u.Usage)
				report.Total.Turns += u.Turns
				report.Total.Usage.Add(u.Usage)
			}
			return nil
		})
	stats.Skipped = append(broken, stats.Skipped...)
	if err != nil {
		return UsageReport{}, stats, fmt.Errorf("usage: %w", err)
	}
	report.Models = make([]ModelUsage, 0, len(byModel))
	for _, u := range byModel {
		report.Models = append(report.Models, *u)
	}
	slices.SortFunc(report.Models, func(a, b ModelUsage) int {
		if c := cmp.Compare(Total(b.Usage), Total(a.Usage)); c != 0 {
			return c
		}
		return cmp.Compare(a.Model, b.Model)
	})
	return report, stats, nil
}

// sessionUsage sums one session's usage per model, through the summary
// scanner (no content is decoded).
func sessionUsage(ctx context.Context, info agent.SessionInfo, r io.Reader, since time.Time) (map[string]*ModelUsage, error) {
	per := map[string]*ModelUsage{}
	d := sessionlog.Decoder{Name: info.ID}
	err := sessionlog.ReadLines(r, func(line []byte, last bool) error {
		if last {
			return nil
		}
		if d.Line%256 == 255 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		turn, ok, err := d.SummarizeTurn(line)
		if err != nil || !ok || turn.Usage == nil || turn.TS.Before(since) {
			return err
		}
		u := per[turn.Identity.Model]
		if u == nil {
			u = &ModelUsage{Model: turn.Identity.Model}
			per[turn.Identity.Model] = u
		}
		u.APIStyle = turn.Identity.APIStyle
		u.Turns++
		u.Usage.Add(*turn.Usage)
		return nil
	})
	return per, err
}
