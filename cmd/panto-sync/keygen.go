package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/internal/seal"
)

func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:      "keygen",
		Usage:     "write a new bucket key file, for an encrypted bucket",
		ArgsUsage: "FILE",
		Description: `keygen writes a new random bucket key to FILE (mode 0600; an existing file is
never overwritten) and prints its key id. A prefix first opened with the key
(--key-file FILE, or PANTO_KEY_FILE, on panto --store s3://... or any panto-sync
command) is created encrypted: every session's messages, titles, last prompts and
hashes are sealed in the bucket (XChaCha20-Poly1305), and only ids, object sizes,
timestamps and counts stay readable. From then on the prefix opens with that key
only; its marker records the key id (never the key), so a wrong key is told from a
damaged object. Keep a copy of the file: without it the sessions cannot be read. To
move to another key, copy the prefix: panto-sync copy --src-key-file OLD --dst-key-file
NEW s3://b/old s3://b/new.

Examples:
   panto-sync keygen ~/.config/panto/bucket.key
   PANTO_KEY_FILE=~/.config/panto/bucket.key panto-sync push s3://my-bucket/panto
   panto --store s3://my-bucket/panto --key-file ~/.config/panto/bucket.key "hello"
   panto-sync keygen --json new.key | jq -r .key_id`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the file and key id as one JSON object"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, fmt.Sprintf("give the FILE to write (got %d arguments)", c.NArg()))
			}
			path := c.Args().First()
			k, err := seal.WriteKeyFile(path, time.Now())
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, _ := json.Marshal(struct {
					Event string `json:"event"`
					File  string `json:"file"`
					KeyID string `json:"key_id"`
				}{"keygen", path, k.ID().String()})
				fmt.Fprintf(c.App.Writer, "%s\n", b)
				return nil
			}
			fmt.Fprintf(c.App.Writer, "wrote a new bucket key to %s (key id %s)\nkeep it secret, and keep a copy elsewhere: without it the sessions sealed with it cannot be read\nuse it with --key-file %s or PANTO_KEY_FILE=%s\n", path, k.ID(), path, path)
			return nil
		},
	}
}
