package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// tally is what one command asked of the bucket, summed from the request
// trace panto and panto-sync print with -v (objstore.WithTrace): one line
// per HTTP request, each attempt of a retried one too.
type tally struct {
	requests int
	received int64 // response bodies
	sent     int64 // request bodies
	// sentSegments is the part of sent that went to session segments
	// (keys with a /seg/ element): what a turn or a push must send
	// whatever the index; the rest is index, manifests and markers.
	sentSegments int64
	// sentPartitions is the part of sent that went to the index's
	// partitions (index/<pp>.json.zst, or <ppp>): in a panto -c, the fold of the
	// session's entry at exit (objstore's Close), not the turn's
	// checkpoints.
	sentPartitions int64
	byMethod       map[string]int // GET, PUT, HEAD, DELETE, LIST
	failed         int            // requests that got no answer (the trace's error=)
	// sentByKind is sent by the kind of object it went to (objectKind).
	sentByKind map[string]int64
}

// objectKind names what a key is for the report of what a turn sent:
// by the key's elements, as panto's format (docs/DESIGN.md §P3) lays
// them out; "other" for any it does not know.
func objectKind(key string) string {
	switch {
	case strings.Contains(key, "/seg/"):
		return "segments"
	case partitionKey.MatchString(key):
		return "partitions"
	case strings.Contains(key, "/index/log/"):
		return "commits"
	case strings.Contains(key, "/index/head/"):
		return "heads"
	case strings.Contains(key, "/index/run/"):
		return "run pages"
	case strings.HasSuffix(key, "/manifest.json"):
		return "manifests"
	}
	return "other"
}

// kindsBeyondSegments is the order objectKind's kinds other than
// segments are reported in.
var kindsBeyondSegments = []string{"commits", "heads", "run pages", "partitions", "manifests", "other"}

// traceLine is one request of the trace, parsed.
type traceLine struct {
	method, key        string
	status             int
	sent, received     int64
	failed, isTraceRow bool
}

// parseTraceLine reads one line of the trace, a log/slog text record:
//
//	time=... level=INFO msg=s3 method=GET key=/b/p/x status=200 sent=0 received=66 ms=1.2
//
// A line that is not a request (any other output of the command) has
// isTraceRow false.
func parseTraceLine(line string) (traceLine, error) {
	fields := textFields(line)
	if fields["msg"] != "s3" {
		return traceLine{}, nil
	}
	t := traceLine{isTraceRow: true, method: fields["method"], key: fields["key"]}
	if t.method == "" {
		return t, fmt.Errorf("trace line without a method: %q", line)
	}
	if strings.Contains(t.key, "?prefix=") {
		t.method = "LIST"
	}
	var err error
	if t.sent, err = intField(fields, "sent"); err != nil {
		return t, fmt.Errorf("%w in %q", err, line)
	}
	if _, failed := fields["error"]; failed {
		t.failed = true
		return t, nil
	}
	if t.received, err = intField(fields, "received"); err != nil {
		return t, fmt.Errorf("%w in %q", err, line)
	}
	status, err := intField(fields, "status")
	if err != nil {
		return t, fmt.Errorf("%w in %q", err, line)
	}
	t.status = int(status)
	return t, nil
}

func intField(fields map[string]string, name string) (int64, error) {
	v, ok := fields[name]
	if !ok {
		return 0, fmt.Errorf("no %s=", name)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not a number", name, v)
	}
	return n, nil
}

// textFields splits a slog text record into its key=value pairs; a value
// may be quoted (Go syntax), as slog quotes one with spaces or quotes.
func textFields(line string) map[string]string {
	out := map[string]string{}
	for s := strings.TrimSpace(line); s != ""; s = strings.TrimLeft(s, " ") {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], " \"") {
			break // not a slog record, or its end
		}
		key, rest := s[:eq], s[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else if sp := strings.IndexByte(rest, ' '); sp >= 0 {
			val, rest = rest[:sp], rest[sp:]
		} else {
			val, rest = rest, ""
		}
		out[key] = val
		s = rest
	}
	return out
}

// partitionKey matches an index partition of format 4 (two characters;
// three once the index widened).
var partitionKey = regexp.MustCompile(`/index/[0-9a-f]{2,3}\.json\.zst$`)

// readTally sums the trace lines of r; other lines are ignored.
func readTally(r io.Reader) (tally, error) {
	t := tally{byMethod: map[string]int{}, sentByKind: map[string]int64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l, err := parseTraceLine(sc.Text())
		if err != nil {
			return t, err
		}
		if !l.isTraceRow {
			continue
		}
		t.requests++
		t.byMethod[l.method]++
		t.sent += l.sent
		t.received += l.received
		if strings.Contains(l.key, "/seg/") {
			t.sentSegments += l.sent
		}
		if partitionKey.MatchString(l.key) {
			t.sentPartitions += l.sent
		}
		if l.failed {
			t.failed++
		}
		if l.sent > 0 {
			t.sentByKind[objectKind(l.key)] += l.sent
		}
	}
	return t, sc.Err()
}

// add adds u's counts to t's.
func (t *tally) add(u tally) {
	t.requests += u.requests
	t.received += u.received
	t.sent += u.sent
	t.sentSegments += u.sentSegments
	t.sentPartitions += u.sentPartitions
	t.failed += u.failed
	for m, n := range u.byMethod {
		t.byMethod[m] += n
	}
	if t.sentByKind == nil {
		t.sentByKind = map[string]int64{}
	}
	for k, n := range u.sentByKind {
		t.sentByKind[k] += n
	}
}

// methods is the count per method, most first: "16 GET, 2 PUT".
func (t tally) methods() string {
	type mc struct {
		m string
		n int
	}
	var ms []mc
	for m, n := range t.byMethod {
		ms = append(ms, mc{m, n})
	}
	sort.Slice(ms, func(i, k int) bool {
		if ms[i].n != ms[k].n {
			return ms[i].n > ms[k].n
		}
		return ms[i].m < ms[k].m
	})
	parts := make([]string, len(ms))
	for i, x := range ms {
		parts[i] = fmt.Sprintf("%d %s", x.n, x.m)
	}
	if t.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", t.failed))
	}
	return strings.Join(parts, ", ")
}
