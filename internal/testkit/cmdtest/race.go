//go:build race

package cmdtest

// Race reports whether this binary runs under the race detector.
const Race = true
