package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// printTables prints what was measured as markdown: every command at
// every size, then the seeding and the full pull against rclone.
func printTables(w io.Writer, o options, runs []sizeRun) {
	fmt.Fprintf(w, "Sessions in %d projects (sizes below); panto-sync --concurrency %d. From panto's request trace (-v): requests, response bytes received, request bytes sent; \"beyond segments\" is what was sent to objects other than session segments, and \"to partitions\" the part of it sent to the index's partitions (a fold of the index runs into the partitions; a panto -c sends none since its exit folds its session into a run page).\n\n", o.projects, o.concurrency)
	fmt.Fprintln(w, "| operation | sessions | requests | by method | received | sent | sent beyond segments | to partitions | wall (s) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	// Each operation with its sizes together.
	var ops []string
	seen := map[string]bool{}
	for _, r := range runs {
		for _, res := range r.results {
			key := opKey(res.op)
			if !seen[key] {
				seen[key] = true
				ops = append(ops, key)
			}
		}
	}
	for _, op := range ops {
		for _, r := range runs {
			for _, res := range r.results {
				if opKey(res.op) != op {
					continue
				}
				fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %.2f |\n", res.op, thousands(r.size), res.t.requests, res.t.methods(),
					humanBytes(res.t.received), humanBytes(res.t.sent), humanBytes(res.t.sent-res.t.sentSegments), humanBytes(res.t.sentPartitions), res.wall.Seconds())
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| sessions | catalog (bytes of logs) | median session | generate (s) | seed push (s) | full pull (s, best of %d) | rclone copy (s, best of %d) | pull ÷ rclone |\n", o.pullRounds, o.pullRounds)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		ratio := "-"
		if r.rclone > 0 {
			ratio = fmt.Sprintf("%.2f", r.fullPull.Seconds()/r.rclone.Seconds())
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.1f | %.1f | %s | %s | %s |\n", thousands(r.size), humanBytes(r.catalogBytes), humanBytes(int64(r.medianBytes)), r.generate.Seconds(),
			r.seed.Seconds(), seconds(r.fullPull), seconds(r.rclone), ratio)
	}
	printTurns(w, runs)
}

// printTurns prints, for the runs of --turns (each a new session) and
// of --continue-turns (each a turn of one session), how what each sent
// beyond its segments is spread (the bound is 32 KB a turn), and
// what the runs that took a step of a fold sent to the partitions.
func printTurns(w io.Writer, runs []sizeRun) {
	printTurnsOf(w, runs, "each a new session (--turns)", func(r sizeRun) []turnCost { return r.turns })
	printTurnsOf(w, runs, "each a turn of one session (--continue-turns)", func(r sizeRun) []turnCost { return r.continued })
}

// printTurnsOf prints the spread of the runs costs gives at each size.
func printTurnsOf(w io.Writer, runs []sizeRun, kind string, costs func(sizeRun) []turnCost) {
	if !slices.ContainsFunc(runs, func(r sizeRun) bool { return len(costs(r)) > 0 }) {
		return
	}
	fmt.Fprintf(w, "\nRuns %s:\n\n", kind)
	fmt.Fprintln(w, "| sessions | runs | sent beyond segments: median | p90 | p99 | max | runs over 32 KB | runs that wrote partitions | to partitions in each: min / median / max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		if len(costs(r)) == 0 {
			continue
		}
		var beyond, parts []int64
		over := 0
		for _, c := range costs(r) {
			beyond = append(beyond, c.beyond)
			if c.beyond > 32_000 {
				over++
			}
			if c.partitions > 0 {
				parts = append(parts, c.partitions)
			}
		}
		slices.Sort(beyond)
		slices.Sort(parts)
		q := func(v []int64, f float64) string {
			if len(v) == 0 {
				return "-"
			}
			return humanBytes(v[min(len(v)-1, int(f*float64(len(v))))])
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %d | %d | %s / %s / %s |\n", thousands(r.size), len(costs(r)), q(beyond, 0.5), q(beyond, 0.9), q(beyond, 0.99), q(beyond, 1),
			over, len(parts), q(parts, 0), q(parts, 0.5), q(parts, 1))
	}
	for _, r := range runs {
		if c := costs(r); len(c) > 0 {
			printFoldSpan(w, r.size, c)
			printOverByKind(w, r.size, c)
		}
	}
}

// printFoldSpan prints which of the runs wrote partitions, the first and
// the last, and what they sent to them together: only a fold writes
// partitions in an agent's exit, so a last one well before the final run
// says that the fold that started in the turns finished in them, and the
// sum is that fold's cost.
func printFoldSpan(w io.Writer, size int, costs []turnCost) {
	first, last := -1, -1
	var sum int64
	for i, c := range costs {
		if c.partitions == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		sum += c.partitions
	}
	if first < 0 {
		return
	}
	fmt.Fprintf(w, "\nAt %s sessions, the runs that wrote partitions were runs %s to %s of %s (%s runs apart), %s to partitions together.\n",
		thousands(size), thousands(first+1), thousands(last+1), thousands(len(costs)), thousands(last-first+1), humanBytes(sum))
}

// printOverByKind prints what the runs over 32 KB sent beyond their
// segments, by kind of object: on average, and the costliest's.
func printOverByKind(w io.Writer, size int, costs []turnCost) {
	var over []turnCost
	costliest := turnCost{}
	for _, c := range costs {
		if c.beyond > 32_000 {
			over = append(over, c)
		}
		if c.beyond > costliest.beyond {
			costliest = c
		}
	}
	fmt.Fprintf(w, "\nAt %s sessions, what runs sent beyond their segments, by object: ", thousands(size))
	if len(over) > 0 {
		sum := map[string]int64{}
		for _, c := range over {
			for k, n := range c.byKind {
				sum[k] += n
			}
		}
		for k := range sum {
			sum[k] /= int64(len(over))
		}
		fmt.Fprintf(w, "the %d over 32 KB, on average, %s; ", len(over), kinds(sum))
	}
	fmt.Fprintf(w, "the costliest (%s), %s.\n", humanBytes(costliest.beyond), kinds(costliest.byKind))
}

// kinds is bytes sent to each kind of object but segments: "commits
// 12.1 KB, heads 11.0 KB, ...", kinds that took none left out.
func kinds(byKind map[string]int64) string {
	var parts []string
	for _, k := range kindsBeyondSegments {
		if n := byKind[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", k, humanBytes(n)))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// opKey groups the rows of one operation across sizes: the label up to
// its parenthesis where the label varies with the size (the push after
// 1% grew names its counts).
func opKey(op string) string {
	if strings.HasPrefix(op, "panto-sync push after") {
		k, _, _ := strings.Cut(op, " (")
		return k
	}
	return op
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

// humanBytes is n in B, KB, MB or GB (powers of 1000, as the issue's
// table), to three significant digits.
func humanBytes(n int64) string {
	v := float64(n)
	for _, unit := range []string{"B", "KB", "MB", "GB"} {
		if v < 1000 || unit == "GB" {
			switch {
			case unit == "B":
				return fmt.Sprintf("%d B", n)
			case v < 10:
				return fmt.Sprintf("%.2f %s", v, unit)
			case v < 100:
				return fmt.Sprintf("%.1f %s", v, unit)
			default:
				return fmt.Sprintf("%.0f %s", v, unit)
			}
		}
		v /= 1000
	}
	return ""
}

// thousands writes n with comma separators: 100,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
