package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/replica"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "say, per session, what push and pull would do",
		ArgsUsage: "s3://BUCKET[/PREFIX]",
		Description: `status compares each local session with the bucket's copy (lengths and prefix
hashes; it changes nothing) and prints one line per session that differs: only local
or local ahead (push would upload), only remote or remote ahead (pull would download),
or diverged; deleted on one side (the next push or pull carries the deletion), or a
conflict: deleted on one side and written to on the other after. It exits 3 when a
session diverged or conflicts. Without --dir it also says, in one line on stderr, what
panto's local-first copy of the bucket kept on this machine (push sends it first);
with no local catalog, that alone.

Examples:
   panto-sync status s3://my-bucket/panto
   panto-sync status --json s3://my-bucket | jq -r 'select(.action=="diverged").id'`,
		Flags:  append([]cli.Flag{dirFlag()}, remoteFlags()...),
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) (ret error) {
	start := time.Now()
	o, err := parseOptions(c)
	if err != nil {
		return err
	}
	bucket, err := bucketArg(c, o)
	if err != nil {
		return err
	}
	if !c.IsSet("dir") {
		// Push sends these first (leftovers.go).
		kept := sayKept(c.Context, o, bucket, o.Endpoint)
		if !exists(o.Dir) && hasReplica(bucket, o.Endpoint) {
			// panto keeps its sessions in the bucket alone: no catalog
			// to compare, as push has none to send.
			text := fmt.Sprintf("status: no local catalog at %s; panto kept nothing on this machine that the bucket lacks", o.Dir)
			if kept != "" {
				text = fmt.Sprintf("status: no local catalog at %s; push sends what panto kept on this machine", o.Dir)
			}
			o.DryRun = true
			newReporter(o, pushDirection).printSummary(Summary{Command: "status", DryRun: true, Counts: map[string]int{}, Seconds: time.Since(start).Seconds(), Text: text})
			return nil
		}
	}
	local, err := end{spec: o.Dir}.open(c.Context, "local catalog")
	if err != nil {
		return err
	}
	defer closeStore(c.Context, local, &ret)
	re := o.end(bucket, o.Endpoint)
	re.reading = true
	remote, err := re.open(c.Context, "bucket")
	if err != nil {
		return err
	}
	defer closeStore(c.Context, remote, &ret)
	// Judged as push and pull will judge it (agreed.go).
	agreed := loadAgreements(agreementsPath(end{spec: o.Dir}, re))
	plans, err := replica.PlanAll(c.Context, local, remote, replica.Options{Concurrency: o.Concurrency, Select: o.selected,
		SrcCovered: agreed.covered, DstCovered: agreed.covered})
	listErr := err
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return err
	}
	o.DryRun = true
	rep := newReporter(o, pushDirection)
	rep.d.cmd = "status"
	sum := Summary{Command: "status", DryRun: true, Sessions: len(plans)}
	for _, p := range plans {
		e := rep.describePlan(p)
		rep.print(e)
		switch e.Event {
		case "failed", "refused":
			sum.Failed++
		case "diverged", "conflict":
			sum.Diverged++
		}
		sum.Bytes += e.Bytes
	}
	sum.Counts = rep.counts
	if listErr != nil {
		sum.Failed++
		fmt.Fprintf(o.Stderr, "panto-sync: %s\n", oneLine(listErr.Error()))
	}
	switch {
	case sum.Failed > 0:
		sum.ExitCode = exitError
	case sum.Diverged > 0:
		sum.ExitCode = exitDiverged
	}
	sum.Seconds = time.Since(start).Seconds()
	sum.Text = fmt.Sprintf("status: %d sessions, %d to transfer (%s), %d unchanged, %d diverged, %d deletion conflicts, %d failed", sum.Sessions, rep.counts["status"], humanBytes(sum.Bytes), rep.counts["unchanged"], rep.counts["diverged"], rep.counts["conflict"], sum.Failed)
	rep.printSummary(sum)
	if sum.ExitCode != exitOK {
		return exitCode(sum.ExitCode)
	}
	return nil
}

// describePlan is what status says of one session's plan (local is the
// source, the bucket the destination).
func (r *reporter) describePlan(p replica.Plan) Event {
	local, remote := p.Src.Length, p.Dst.Length
	e := Event{ID: p.ID, Action: r.d.action(p.Relation), LocalLength: &local, RemoteLength: &remote, DeletedAt: deletedAt(p)}
	if p.Err != nil {
		e.Event, e.Error = "failed", p.Err.Error()
		e.Text = fmt.Sprintf("failed    %s: %v", p.ID, p.Err)
		return e
	}
	diff := local - remote
	if diff < 0 {
		diff = -diff
	}
	what := map[replica.Relation]string{
		replica.Same:       "same bytes on both sides",
		replica.SrcOnly:    "only local: push uploads it",
		replica.SrcAhead:   fmt.Sprintf("local is ahead by %s: push uploads the tail", humanBytes(diff)),
		replica.DstOnly:    "only remote: pull downloads it",
		replica.DstAhead:   fmt.Sprintf("remote is ahead by %s: pull appends the tail", humanBytes(diff)),
		replica.Diverged:   "diverged: neither is a prefix of the other",
		replica.SrcDeleted: "deleted locally: push deletes the remote copy",
		replica.DstDeleted: "deleted in the bucket: pull deletes the local copy",
	}[p.Relation]
	switch {
	case p.Relation == replica.Same, p.Relation == replica.SrcDeleted && remote == 0 && p.DstTomb != nil,
		p.Relation == replica.DstDeleted && local == 0:
		// Both deleted it (or the deleting side's copy is all there is).
		e.Event = "unchanged"
	case p.Relation == replica.SrcDeleted && remote == 0:
		e.Event = "status"
		what = "deleted locally: push records the deletion in the bucket"
	case p.Relation == replica.Diverged:
		e.Event = "diverged"
	case p.Relation == replica.DeleteConflict:
		e.Event = "conflict"
		what = "conflict: " + r.d.conflictText(p)
	case p.Relation == replica.SrcDeleted || p.Relation == replica.DstDeleted:
		e.Event = "status"
	default:
		e.Event, e.Bytes = "status", diff
	}
	e.Text = fmt.Sprintf("%-9s %s  local %d B, remote %d B: %s", e.Action, p.ID, local, remote, what)
	return e
}
