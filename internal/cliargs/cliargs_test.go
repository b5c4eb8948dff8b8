package cliargs

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestReorder(t *testing.T) {
	app := &cli.App{
		Name:  "tool",
		Flags: []cli.Flag{&cli.StringFlag{Name: "endpoint"}, &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}}},
		Commands: []*cli.Command{{
			Name:  "status",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "json"}, &cli.StringFlag{Name: "dir"}, &cli.StringSliceFlag{Name: "include"}},
		}},
	}
	for _, tt := range []struct{ in, want string }{
		{"tool status s3://b --json", "tool status --json s3://b"},
		{"tool status s3://b --dir d --include a* --json", "tool status --dir d --include a* --json s3://b"},
		{"tool status --dir=d s3://b -json", "tool status --dir=d -json s3://b"},
		{"tool --endpoint http://e -v status s3://b --json", "tool --endpoint http://e -v status --json s3://b"},
		{"tool --endpoint status status s3://b --json", "tool --endpoint status status --json s3://b"}, // the first status is the flag's value
		{"tool status -- s3://b --json", "tool status -- s3://b --json"},
		{"tool status - --json", "tool status --json -"},
		{"tool unknown s3://b --json", "tool unknown s3://b --json"},
		{"tool --json", "tool --json"},
		{"tool", "tool"},
	} {
		if got := strings.Join(Reorder(app, strings.Fields(tt.in)), " "); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
}
