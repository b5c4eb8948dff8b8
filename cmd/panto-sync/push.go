package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
)

func pushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "upload the local catalog to a bucket: new sessions, and the tails appended since the last push",
		ArgsUsage: "s3://BUCKET[/PREFIX]",
		Description: `push uploads every local session the bucket lacks, and for a session the bucket
already holds a prefix of, the bytes after it (as one new segment, or several of at
most 8 MiB for a large tail). A file's torn last line (a write in progress) is not
pushed. A session whose copies diverged is left alone and reported (exit 3), or with
--on-diverge=keep-both the local copy is pushed as a new session linked to the
original. A session deleted locally (panto rm) is deleted in the bucket too, leaving
its tombstone; one deleted in the bucket is left alone here (pull deletes it). A
session deleted on one side and written to on the other after the deletion is a
conflict: reported, both untouched, exit 3 (keep-both keeps the written copy as a new
session); so is a shorter copy holding a turn the other side never had, as the record
of where the two last agreed says ($XDG_STATE_HOME/panto/sync, kept by push, pull,
copy and watch alike). push is "panto-sync copy DIR s3://..." with the local catalog as the source.
Without --dir, push first sends what panto's local-first replica of the bucket kept on
this machine (prompts of a panto run that exited before the bucket took them), as
panto's own shipper would; with no local catalog it sends only that.
A run that finds nothing to do notes both sides' state (a stat of each local file; the
bucket's newest index commit): the next run that finds both as they were, within a day,
says so without comparing the sessions (--full compares them anyway).

Examples:
   panto-sync push s3://my-bucket/panto
   panto-sync push --dir ~/sessions --endpoint http://127.0.0.1:9000 s3://sessions
   panto-sync push --dry-run --include '3f*' s3://my-bucket
   panto-sync push --full s3://my-bucket        # compare every session, whatever the last run found
   panto-sync push --json s3://my-bucket | jq 'select(.event=="pushed")'`,
		Flags: append([]cli.Flag{dirFlag(), dryRunFlag(), onDivergeFlag("local"), fullFlag()}, remoteFlags()...),
		Action: func(c *cli.Context) error {
			o, err := parseOptions(c)
			if err != nil {
				return err
			}
			bucket, err := bucketArg(c, o)
			if err != nil {
				return err
			}
			src, dst := end{spec: o.Dir}, o.end(bucket, o.Endpoint)
			if dst.leftovers = !c.IsSet("dir"); dst.leftovers && !exists(o.Dir) && hasReplica(bucket, o.Endpoint) {
				if o.DryRun {
					// Nothing to compare, and a dry run makes no
					// catalog: it made an empty one, which every later
					// command then took for the catalog.
					return dryRunLeftovers(c, o, bucket)
				}
				// panto keeps its sessions in the bucket alone: push
				// sends what it kept here, from an empty catalog.
				src.create = true
			}
			return runCopy(c, o, pushDirection, src, dst)
		},
	}
}

// dryRunLeftovers is push --dry-run without a local catalog: what panto
// kept on this machine for bucket is all push would send (sayKept).
func dryRunLeftovers(c *cli.Context, o *options, bucket string) error {
	start := time.Now()
	text := fmt.Sprintf("push: no local catalog at %s; panto kept nothing on this machine that the bucket lacks", o.Dir)
	if sayKept(c.Context, o, bucket, o.Endpoint) != "" {
		text = fmt.Sprintf("push: no local catalog at %s; push would send what panto kept on this machine", o.Dir)
	}
	newReporter(o, pushDirection).printSummary(Summary{Command: "push", DryRun: true, Counts: map[string]int{}, Seconds: time.Since(start).Seconds(), Text: text})
	return nil
}
