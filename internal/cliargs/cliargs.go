// Package cliargs lets a command's flags come after its arguments, as
// people type them (panto search QUERY --json, panto-sync status
// s3://b --json): the cli package stops reading flags at the first
// argument, so each command line is reordered, flags first, before it
// is parsed. After "--" nothing is a flag.
package cliargs

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// FlagsFirst returns args, the arguments that follow the name of command
// cmd, with its flags (and the values of those that take one) moved
// before the other arguments.
func FlagsFirst(cmd *cli.Command, args []string) []string {
	var flags, positional []string
	dashes := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case dashes || a == "-" || !strings.HasPrefix(a, "-"):
			positional = append(positional, a)
		case a == "--":
			dashes = true
		default:
			flags = append(flags, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !hasValue && TakesValue(cmd.Flags, name) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	out := flags
	if dashes {
		out = append(out, "--")
	}
	return append(out, positional...)
}

// Reorder returns the command line args (the program's name first) with
// the flags of the command it names moved before that command's
// arguments; the application's own flags, before the command, stay
// where they are. A line that names no command is returned as it is.
func Reorder(app *cli.App, args []string) []string {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			cmd := app.Command(a)
			if cmd == nil {
				return args
			}
			out := append([]string{}, args[:i+1]...)
			return append(out, FlagsFirst(cmd, args[i+1:])...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && TakesValue(app.Flags, name) {
			i++ // its value
		}
	}
	return args
}

// TakesValue reports whether the flag of this name is one that takes a
// value (anything but a bool flag).
func TakesValue(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
