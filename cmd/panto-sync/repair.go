package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/store"
)

func repairCommand() *cli.Command {
	return &cli.Command{
		Name:      "repair",
		Usage:     "rebuild a bucket's index from its sessions",
		ArgsUsage: "s3://BUCKET[/PREFIX]",
		Description: `The index of a bucket (the shards ls, push and pull list sessions from) is a cache
of the sessions' own objects. When it is lost or damaged (a lifecycle rule, a
mistaken delete, an overwritten object), sessions go missing from lists although
their data is there. repair lists the bucket to find every session, reads each one,
and rebuilds every index shard that is missing an entry, holds a stale or orphan one,
or does not decode, and every project's head (the newest sessions of a project,
which panto sessions and panto -c read) that gets its project wrong; it deletes
the index run pages no commit names (left by a write whose commit failed) once
they are a day old. A bucket an earlier panto wrote gets its project heads. It
reports what it found, is safe to run while others write, and with --dry-run only
reports. verify checks the same and says when to run it.

Examples:
   panto-sync repair s3://my-bucket/panto
   panto-sync repair --dry-run --json s3://my-bucket/panto`,
		Flags:  append([]cli.Flag{dryRunFlag()}, remoteFlags()...),
		Action: runRepair,
	}
}

func runRepair(c *cli.Context) (ret error) {
	start := time.Now()
	o, err := parseOptions(c)
	if err != nil {
		return err
	}
	if len(o.Args) != 1 {
		return usageError(c, "give the one store to repair: s3://BUCKET[/PREFIX]")
	}
	s, err := o.end(o.Args[0], o.Endpoint).open(c.Context, "store")
	if err != nil {
		return err
	}
	defer closeStore(c.Context, s, &ret)
	do := store.RepairIndex
	if o.DryRun {
		do = store.CheckIndex
	}
	report, err := do(c.Context, s)
	if errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("%s has no index to repair: a directory's summary cache rebuilds itself", o.Args[0])
	}
	if err != nil {
		return err
	}
	rep := newReporter(o, direction{cmd: "repair"})
	for _, e := range indexEvents(report, !o.DryRun) {
		rep.print(e)
	}
	sum := Summary{Command: "repair", DryRun: o.DryRun, Sessions: len(report.Sessions), Counts: rep.counts, Seconds: time.Since(start).Seconds()}
	sum.Failed = len(report.Unreadable)
	if sum.Failed > 0 {
		sum.ExitCode = exitError
	}
	sum.Text = repairText(report, o.DryRun, o.Args[0])
	rep.printSummary(sum)
	if sum.ExitCode != exitOK {
		return exitCode(sum.ExitCode)
	}
	return nil
}

// indexEvents are the findings of an index check, one event each.
// repaired says they were mended (repair) rather than only found.
func indexEvents(r store.IndexReport, repaired bool) []Event {
	var out []Event
	add := func(kind string, ids []string, what string) {
		for _, id := range ids {
			e := Event{Event: kind, ID: id, Text: fmt.Sprintf("%-13s %s: %s", kind, id, what)}
			if repaired {
				e.Note = "repaired"
				e.Text += " (repaired)"
			}
			out = append(out, e)
		}
	}
	add("unindexed", r.Unindexed, "in the bucket, missing from its index")
	add("stale-entry", r.Stale, "its index entry is behind (or other than) what the bucket holds")
	add("orphan-entry", r.Orphans, "its index entry names a session the bucket does not hold")
	add("recent-entry", r.Recent, "the index log's newest sessions miss it, or show it though it is deleted or absent")
	for _, name := range r.Heads {
		e := Event{Event: "wrong-head", ID: name, Text: fmt.Sprintf("wrong-head    %s: project head index/head/%s.json.zst misses a session of its project, or shows one absent or further than it is", name, name)}
		if repaired {
			e.Note, e.Text = "rebuilt", e.Text+" (rebuilt)"
		}
		out = append(out, e)
	}
	for _, name := range r.Damaged {
		e := Event{Event: "damaged-shard", ID: name, Text: fmt.Sprintf("damaged-shard %s: index shard %s does not decode", name, name)}
		if repaired {
			e.Note, e.Text = "rebuilt", e.Text+" (rebuilt)"
		}
		out = append(out, e)
	}
	for _, key := range r.Removed {
		out = append(out, Event{Event: "removed", ID: key, Note: "removed", Text: fmt.Sprintf("removed       %s: an index run page no commit names (a write that failed after it)", key)})
	}
	for id, err := range r.Unreadable {
		out = append(out, Event{Event: "failed", ID: id, Error: err.Error(), Text: fmt.Sprintf("failed        %s: %v", id, err)})
	}
	return out
}

func repairText(r store.IndexReport, dryRun bool, where string) string {
	found := len(r.Unindexed) + len(r.Stale) + len(r.Orphans) + len(r.Recent) + len(r.Heads)
	text := fmt.Sprintf("repair: %d sessions; %d unindexed, %d stale, %d orphan entries, %d damaged shards", len(r.Sessions), len(r.Unindexed), len(r.Stale), len(r.Orphans), len(r.Damaged))
	if len(r.Heads) > 0 {
		text += fmt.Sprintf(", %d wrong project heads", len(r.Heads))
	}
	switch {
	case r.Clean():
		text += "; the index is whole"
	case dryRun:
		text += fmt.Sprintf("; run `panto-sync repair %s` to mend them", where)
	default:
		text += fmt.Sprintf("; rebuilt %d parts (%s) for %d entries", len(r.Rebuilt), strings.Join(r.Rebuilt, ", "), found)
	}
	if len(r.Removed) > 0 {
		text += fmt.Sprintf("; removed %d index run pages no commit names", len(r.Removed))
	}
	if len(r.Unreadable) > 0 {
		text += fmt.Sprintf("; %d sessions could not be read (see above): `panto-sync verify` says which object", len(r.Unreadable))
	}
	return text
}

// checkIndex is verify's check of a store's index, when it has one: the
// sessions the store holds, the findings as events, and an error saying
// to repair when there are any.
func checkIndex(ctx context.Context, s store.LogStore, where string) (sessions []string, events []Event, err error) {
	report, err := store.CheckIndex(ctx, s)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	events = indexEvents(report, false)
	if !report.Clean() {
		return report.Sessions, events, fmt.Errorf("the index of %s is not whole (%d unindexed, %d stale, %d orphan entries, %d damaged shards, %d wrong recent entries, %d wrong project heads): run `panto-sync repair %s`",
			where, len(report.Unindexed), len(report.Stale), len(report.Orphans), len(report.Damaged), len(report.Recent), len(report.Heads), where)
	}
	return report.Sessions, events, nil
}
