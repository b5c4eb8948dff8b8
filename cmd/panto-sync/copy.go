package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func copyCommand() *cli.Command {
	return &cli.Command{
		Name:      "copy",
		Usage:     "copy the sessions of one store into another: directory or bucket, either way",
		ArgsUsage: "SRC DST",
		Description: `copy makes every session of SRC present in DST, incrementally: a session DST lacks
is copied whole, one DST holds a prefix of gets the bytes after it, one DST holds all
of is left alone. Each of SRC and DST is a directory, file:///DIR or s3://BUCKET[/PREFIX];
buckets on different servers take --src-endpoint and --dst-endpoint (--endpoint sets
both). A session whose copies diverged is left alone and reported (exit 3), or with
--on-diverge=keep-both the source's copy is stored in DST as a new session linked to
the original. Nothing in SRC is ever written, and nothing in DST is overwritten.

Examples:
   panto-sync copy ~/.local/share/panto/sessions s3://archive/panto
   panto-sync copy --src-endpoint http://127.0.0.1:9000 --dst-endpoint https://ACCOUNT.r2.cloudflarestorage.com s3://old/panto s3://new/panto
   panto-sync copy s3://my-bucket/panto s3://my-bucket/panto-backup
   panto-sync copy --dry-run --json s3://my-bucket/panto /tmp/restore`,
		Flags: append([]cli.Flag{
			dryRunFlag(), onDivergeFlag("source's"),
			&cli.StringFlag{Name: "src-endpoint", Usage: "S3 endpoint `URL` of SRC (default: --endpoint)"},
			&cli.StringFlag{Name: "dst-endpoint", Usage: "S3 endpoint `URL` of DST (default: --endpoint)"},
		}, remoteFlags()...),
		Action: func(c *cli.Context) error {
			o, err := parseOptions(c)
			if err != nil {
				return err
			}
			if len(o.Args) != 2 {
				return usageError(c, fmt.Sprintf("give SRC and DST (got %d arguments)", len(o.Args)))
			}
			src := o.end(o.Args[0], firstNonEmpty(c.String("src-endpoint"), o.Endpoint))
			dst := o.end(o.Args[1], firstNonEmpty(c.String("dst-endpoint"), o.Endpoint))
			dst.create = !o.DryRun
			if src.spec == dst.spec && src.endpoint == dst.endpoint {
				return usageError(c, "SRC and DST are the same store")
			}
			return runCopy(c, o, copyDirection, src, dst)
		},
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
