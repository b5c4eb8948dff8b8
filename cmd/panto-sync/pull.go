package main

import (
	"github.com/urfave/cli/v2"
)

func pullCommand() *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "download a bucket into the local catalog: new sessions, and the tails appended remotely",
		ArgsUsage: "s3://BUCKET[/PREFIX]",
		Description: `pull writes every session the catalog lacks (a new file, atomically) and appends to
a local file the bytes the bucket holds after it, as the bucket's index lists them (a
session appended since its index entry comes as listed; the next pull brings the rest).
Everything written is made durable in one sync before pull reports success. Pulling a
pushed catalog into an empty directory reproduces every file byte for byte. A session whose copies
diverged is left alone and reported (exit 3), or with --on-diverge=keep-both the remote
copy is written as a new local session linked to the original. A session deleted in
the bucket is deleted locally (the file goes, a tombstone stays in .panto-deleted); a
session deleted on one side and written to on the other after is a conflict, reported
with exit 3; so is a shorter copy holding a turn the other side never had, as the
record of where the two last agreed says ($XDG_STATE_HOME/panto/sync, kept by push,
pull, copy and watch alike). Session ids that could escape --dir are refused. pull is
"panto-sync copy s3://... DIR".
A run that finds nothing to do notes both sides' state (a stat of each local file; the
bucket's newest index commit): the next run that finds both as they were, within a day,
says so without comparing the sessions (--full compares them anyway).

Examples:
   panto-sync pull s3://my-bucket/panto
   panto-sync pull --dir /tmp/restore --endpoint http://127.0.0.1:9000 s3://sessions
   panto-sync pull --on-diverge=keep-both s3://my-bucket`,
		Flags: append([]cli.Flag{dirFlag(), dryRunFlag(), onDivergeFlag("remote"), fullFlag()}, remoteFlags()...),
		Action: func(c *cli.Context) error {
			o, err := parseOptions(c)
			if err != nil {
				return err
			}
			bucket, err := bucketArg(c, o)
			if err != nil {
				return err
			}
			return runCopy(c, o, pullDirection, o.end(bucket, o.Endpoint), end{spec: o.Dir, create: !o.DryRun})
		},
	}
}
