package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestParseTraceLine reads the records objstore.WithTrace writes (made
// here with the same slog handler), and ignores every other line.
func TestParseTraceLine(t *testing.T) {
	record := func(args ...any) string {
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("s3", args...)
		return strings.TrimSpace(buf.String())
	}
	tests := []struct {
		name    string
		line    string
		want    traceLine
		wantErr bool
	}{
		{"a GET", record("method", "GET", "key", "/b/p/panto-store.json", "status", 200, "sent", 0, "received", 66, "ms", 1.5),
			traceLine{isTraceRow: true, method: "GET", key: "/b/p/panto-store.json", status: 200, received: 66}, false},
		{"a PUT of a segment", record("method", "PUT", "key", "/b/p/sessions/ab/seg/00000000000000000000.jsonl.zst", "status", 200, "sent", 812, "received", 0, "ms", 3.0),
			traceLine{isTraceRow: true, method: "PUT", key: "/b/p/sessions/ab/seg/00000000000000000000.jsonl.zst", status: 200, sent: 812}, false},
		{"a LIST", record("method", "GET", "key", "/b?prefix=p/sessions/", "status", 200, "sent", 0, "received", 900, "ms", 2.0),
			traceLine{isTraceRow: true, method: "LIST", key: "/b?prefix=p/sessions/", status: 200, received: 900}, false},
		{"a request without an answer", record("method", "PUT", "key", "/b/k", "error", "dial tcp 127.0.0.1:1: connection refused", "sent", 10, "ms", 0.2),
			traceLine{isTraceRow: true, method: "PUT", key: "/b/k", sent: 10, failed: true}, false},
		{"a warning of panto", "panto: warning: no project: gone", traceLine{}, false},
		{"another log record", `time=2026-12-01T23:20:47.461Z level=INFO msg="shipper idle" method=GET`, traceLine{}, false},
		{"a truncated record", `time=2026-12-01T23:20:47.461Z level=INFO msg=s3 method=GET key=/b/k status=200`, traceLine{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTraceLine(tt.line)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseTraceLine(%q) error %v, want error %v", tt.line, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("parseTraceLine(%q) = %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

// TestReadTally sums a command's stderr: its requests, bytes and the part
// sent to segments, and nothing of its other lines.
func TestReadTally(t *testing.T) {
	stderr := strings.Join([]string{
		`time=t level=INFO msg=s3 method=GET key=/b/p/index/0.json.zst status=200 sent=0 received=1000 ms=1`,
		`panto: warning: something`,
		`time=t level=INFO msg=s3 method=PUT key=/b/p/sessions/ab/seg/00000000000000000000.jsonl.zst status=200 sent=500 received=0 ms=1`,
		`time=t level=INFO msg=s3 method=PUT key=/b/p/index/a.json.zst status=412 sent=300 received=200 ms=1`,
		`time=t level=INFO msg=s3 method=GET key="/b?prefix=p/x y" status=200 sent=0 received=7 ms=1`,
		`time=t level=INFO msg=s3 method=PUT key=/b/p/index/a0.json.zst status=200 sent=40 received=0 ms=1`,
	}, "\n")
	got, err := readTally(strings.NewReader(stderr))
	if err != nil {
		t.Fatal(err)
	}
	if got.requests != 5 || got.received != 1207 || got.sent != 840 || got.sentSegments != 500 || got.sentPartitions != 40 {
		t.Errorf("tally = %+v, want 5 requests, 1207 received, 840 sent of which 500 to segments and 40 to partitions", got)
	}
	if m := got.methods(); m != "3 PUT, 1 GET, 1 LIST" {
		t.Errorf("methods = %q", m)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.00 KB", 188_200: "188 KB", 8_700_000: "8.70 MB", 17_450_000: "17.4 MB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestObjectKind sorts the keys panto writes by what they are for, and
// any other as "other".
func TestObjectKind(t *testing.T) {
	for key, want := range map[string]string{
		"/b/p/sessions/ab/seg/00000000000000000000.jsonl.zst": "segments",
		"/b/p/index/3f.json.zst":                              "partitions",
		"/b/p/index/3f0.json.zst":                             "partitions",
		"/b/p/index/log/00000000000000000016.json.zst":        "commits",
		"/b/p/index/head/0123456789abcdef.json.zst":           "heads",
		"/b/p/index/run/0123456789abcdef-000.json.zst":        "run pages",
		"/b/p/sessions/ab/manifest.json":                      "manifests",
		"/b/p/panto-store.json":                               "other",
	} {
		if got := objectKind(key); got != want {
			t.Errorf("objectKind(%q) = %q, want %q", key, got, want)
		}
	}
}
