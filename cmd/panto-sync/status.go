package main

import (
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "say, per session, what push and pull would do",
		ArgsUsage: "s3://BUCKET[/PREFIX]",
		Description: `status compares each local session with the bucket's copy (lengths and prefix
hashes; it changes nothing) and prints one line per session that differs: only local
or local ahead (push would upload), only remote or remote ahead (pull would download),
or diverged. It exits 3 when a session diverged.

Examples:
   panto-sync status s3://my-bucket/panto
   panto-sync status --json s3://my-bucket | jq -r 'select(.action=="diverged").id'`,
		Flags:  append([]cli.Flag{dirFlag()}, remoteFlags()...),
		Action: func(c *cli.Context) error { return runSync(c, cmdStatus) },
	}
}
