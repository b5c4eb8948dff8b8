package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/store"
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
both), and an encrypted one its key: --src-key-file and --dst-key-file (--key-file, or
PANTO_KEY_FILE, sets both; an empty --dst-key-file= says DST has none). A DST prefix
created by the copy is encrypted with --dst-key-file, and plaintext without one; a
directory is never encrypted, so a copy decrypts into it and encrypts out of it. A
session whose copies diverged is left alone and reported (exit 3), or with
--on-diverge=keep-both the source's copy is stored in DST as a new session linked to
the original. A deletion in SRC (its tombstone) is carried to DST, whose copy goes;
nothing deleted comes back. Nothing in SRC is ever written, and nothing in DST is
overwritten, except that a deletion removes DST's copy of what SRC deleted.

Examples:
   panto-sync copy ~/.local/share/panto/sessions s3://archive/panto
   panto-sync copy --src-endpoint http://127.0.0.1:9000 --dst-endpoint https://ACCOUNT.r2.cloudflarestorage.com s3://old/panto s3://new/panto
   panto-sync copy s3://my-bucket/panto s3://my-bucket/panto-backup
   panto-sync copy --dry-run --json s3://my-bucket/panto /tmp/restore
   panto-sync copy --src-key-file old.key --dst-key-file new.key s3://my-bucket/panto s3://my-bucket/panto-rekeyed
   panto-sync copy --src-key-file bucket.key s3://my-bucket/panto ~/restore`,
		Flags: append([]cli.Flag{
			dryRunFlag(), onDivergeFlag("source's"), fullFlag(),
			&cli.StringFlag{Name: "src-endpoint", Usage: "S3 endpoint `URL` of SRC (default: --endpoint)"},
			&cli.StringFlag{Name: "dst-endpoint", Usage: "S3 endpoint `URL` of DST (default: --endpoint)"},
			&cli.StringFlag{Name: "src-key-file", Usage: "the key `FILE` of an encrypted SRC (default: --key-file)", EnvVars: []string{"PANTO_SRC_KEY_FILE"}},
			&cli.StringFlag{Name: "dst-key-file", Usage: "the key `FILE` of an encrypted DST, or of the encrypted prefix the copy creates (default: --key-file; empty: none)", EnvVars: []string{"PANTO_DST_KEY_FILE"}},
		}, remoteFlags()...),
		Action: runCopyCommand,
	}
}

// runCopyCommand is copy: the two sides as its flags name them, then
// runCopy.
func runCopyCommand(c *cli.Context) error {
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
	for _, side := range []struct {
		e    *end
		flag string
	}{{&src, "src-key-file"}, {&dst, "dst-key-file"}} {
		if !c.IsSet(side.flag) {
			continue
		}
		side.e.keyFile = c.String(side.flag)
		if spec, err := store.ParseSpec(side.e.spec); err == nil && spec.Kind != store.KindS3 && side.e.keyFile != "" {
			return usageError(c, fmt.Sprintf("--%s for %s, a directory: a directory is never encrypted (the local catalog stays plaintext)", side.flag, side.e.spec))
		}
	}
	if src.spec == dst.spec && src.endpoint == dst.endpoint {
		return usageError(c, "SRC and DST are the same store")
	}
	return runCopy(c, o, copyDirection, src, dst)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
