package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func batch(t testing.TB, id string, header bool, texts ...string) []byte {
	t.Helper()
	var msgs []agent.PersistentMessage
	for _, s := range texts {
		msgs = append(msgs, agent.PersistentMessage{Message: agent.UserText(s),
			Identity: agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, Model: "m"}})
	}
	b, err := sessionlog.EncodeBatch(id, header, msgs, t0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sample(t testing.TB) (*Manifest, []byte) {
	id := "0123abcd"
	m := New(id)
	var raw []byte
	for i, b := range [][]byte{batch(t, id, true, "a"), batch(t, id, false, "b", "c"), batch(t, id, false, "d")} {
		if _, err := m.Append(SegmentName(m.Length), b, int64(len(b)/2+1)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		raw = append(raw, b...)
	}
	return m, raw
}

func TestManifestAppendAndRoundTrip(t *testing.T) {
	m, raw := sample(t)
	sum := sha256.Sum256(raw)
	if m.Length != int64(len(raw)) || m.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("length %d sha %s, want %d %x", m.Length, m.SHA256, len(raw), sum)
	}
	log, err := sessionlog.Parse("x", raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Info(), log.Info) {
		t.Fatalf("info %+v, want %+v", m.Info(), log.Info)
	}
	if got := m.Segments[1].Lines; got != 2 {
		t.Fatalf("lines %d", got)
	}
	first := sha256.Sum256(raw[:m.Segments[0].Length])
	if m.Segments[0].PrefixSHA256 != hex.EncodeToString(first[:]) {
		t.Fatal("prefix hash of the first segment")
	}
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip:\n%+v\n%+v", back, m)
	}
}

func TestManifestAppendRejects(t *testing.T) {
	id := "0123abcd"
	cases := []struct {
		name string
		m    func() *Manifest
		raw  []byte
	}{
		{"no header", func() *Manifest { return New(id) }, batch(t, id, false, "x")},
		{"other session", func() *Manifest { return New(id) }, batch(t, "ffff", true, "x")},
		{"second header", func() *Manifest { m, _ := sample(t); return m }, batch(t, id, true, "x")},
		{"torn", func() *Manifest { m, _ := sample(t); return m }, batch(t, id, false, "x", "y")[:10]},
		{"unfinished batch", func() *Manifest { m, _ := sample(t); return m }, bytes.SplitAfter(batch(t, id, false, "x", "y"), []byte("\n"))[0]},
		{"empty", func() *Manifest { return New(id) }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.m()
			before, _ := Encode(m)
			if _, err := m.Append("seg", c.raw, 1); err == nil {
				t.Fatal("no error")
			}
			after, _ := Encode(m)
			if !bytes.Equal(before, after) {
				t.Fatal("manifest changed by a failed append")
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	m, _ := sample(t)
	good, _ := Encode(m)
	cases := map[string]string{
		"newer":    strings.Replace(string(good), fmt.Sprintf(`"version":%d`, Version), fmt.Sprintf(`"version":%d`, Version+1), 1),
		"gap":      strings.Replace(string(good), `"start":0`, `"start":1`, 1),
		"length":   strings.Replace(string(good), `"length":`, `"length":1`, 1),
		"bad id":   strings.Replace(string(good), `"id":"0123abcd"`, `"id":"../x"`, 1),
		"not json": "{",
		"trailing": string(good) + "{}",
	}
	for name, data := range cases {
		_, err := Decode([]byte(data))
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if name == "newer" && !errors.Is(err, ErrNewerVersion) {
			t.Errorf("newer: %v", err)
		}
	}
}

func TestIndexShard(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sample(t)
	s := NewIndexShard(ShardOf(m.ID))
	if !s.Put(IndexEntry{Info: m.Info(), Length: m.Length, SHA256: m.SHA256}) {
		t.Fatal("put")
	}
	if s.Put(IndexEntry{Info: m.Info(), Length: m.Length - 1, SHA256: m.SHA256}) {
		t.Fatal("a shorter log replaced a longer one")
	}
	data, err := c.EncodeIndexShard("index/x.json.zst", s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := c.DecodeIndexShard("index/x.json.zst", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip %+v", back)
	}
	wrong := NewIndexShard("f")
	wrong.Sessions[m.ID] = s.Sessions[m.ID]
	if _, err := c.EncodeIndexShard("index/x.json.zst", wrong); err == nil {
		t.Fatal("misfiled session accepted")
	}
}

func TestShardOf(t *testing.T) {
	seen := map[string]bool{}
	for _, id := range []string{"0a", "9", "abc", "f0", "A", "Z", "_", "-", "zz", "g"} {
		sh := ShardOf(id)
		if len(sh) != 1 || !strings.Contains(hexDigits, sh) {
			t.Fatalf("ShardOf(%q) = %q", id, sh)
		}
		if ShardOf(id+"xyz") != sh {
			t.Fatalf("prefix %q and its extension fall in different shards", id)
		}
		seen[sh] = true
	}
	for _, d := range hexDigits {
		if ShardOf(string(d)+"123") != string(d) {
			t.Fatalf("hex id %c", d)
		}
	}
}

// TestPartitionWidths: a partition of three characters (a widened
// index, FeatureIndexWide) lies within the one of two that its first two
// start, and a page of either width covers the partitions of both that
// its range holds, in the order of their names.
func TestPartitionWidths(t *testing.T) {
	for w, n := range map[int]int{1: 16, 2: 256, 3: 4096} {
		names := PartitionNames(w)
		if len(names) != n || !slices.IsSorted(names) || len(names[0]) != w {
			t.Fatalf("PartitionNames(%d): %d names, sorted %v", w, len(names), slices.IsSorted(names))
		}
	}
	for _, id := range []string{"0a1b2c", "fff0", "Zq_x", "7f3e"} {
		wide := PartitionOf(id, 3)
		if len(wide) != 3 || wide[:2] != PartitionOf(id, 2) || wide[:1] != PartitionOf(id, 1) {
			t.Fatalf("PartitionOf(%q): %q, %q, %q", id, wide, PartitionOf(id, 2), PartitionOf(id, 1))
		}
		if PartitionOf(wide, 3) != wide || PartitionOf(id[:3], 3) != wide {
			t.Fatalf("a prefix of %q falls outside %q", id, wide)
		}
	}
	for _, c := range []struct {
		a, b string
		want int
	}{{"7f", "7f3", 0}, {"7f3", "7f", 0}, {"7e", "7f0", -1}, {"7f", "80a", -1}, {"80a", "7ff", 1}, {"7f3", "7f4", -1}} {
		if got := ComparePartitions(c.a, c.b); got != c.want {
			t.Errorf("ComparePartitions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	narrow := RunPage{First: "10", Last: "7f"}
	wide := RunPage{First: "100", Last: "7f3"}
	for name, want := range map[string][2]bool{
		"0f": {false, false}, "10": {true, true}, "100": {true, true}, "7f": {true, true},
		"7f3": {true, true}, "7f4": {true, false}, "7ff": {true, false}, "80": {false, false}, "800": {false, false},
	} {
		if got := [2]bool{narrow.Covers(name), wide.Covers(name)}; got != want {
			t.Errorf("pages 10..7f and 100..7f3 cover %q: %v, want %v", name, got, want)
		}
	}
}

// TestCompressBytes: Compress writes the frame the zstd encoder writes
// with no buffer given (the buffer it passes only saves allocations).
func TestCompressBytes(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 100, 5_000, 200_000, 1 << 20, 3_000_000} {
		raw, err := sessiongen.New(uint64(n)).Session("0123456789abcdef0123456789abcdef", n, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Compress(raw), ref.EncodeAll(raw, nil); !bytes.Equal(got, want) {
			t.Errorf("%d raw bytes: Compress wrote %d bytes that differ from EncodeAll's %d", len(raw), len(got), len(want))
		}
	}
}

// TestStaleSummaryRefold: a manifest whose summary was folded by a writer
// that predates some of its fields (the title and token totals: no
// summary_version; the project: version 1) is stale; Refold folds them
// from the log, and what is encoded then says it is whole.
func TestStaleSummaryRefold(t *testing.T) {
	id := "0123abcd"
	project := agent.Project{Remote: "example.test/team/proj", Root: "/src/proj", Dir: "/src/proj"}
	first, err := sessionlog.EncodeBatchIn(project, id, true, []agent.PersistentMessage{{Message: agent.UserText("a")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	title, err := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{
		{Message: agent.TitleMessage("a title")},
		{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{}}, Usage: &agent.Usage{InputTokens: 5, OutputTokens: 6}},
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	m := New(id)
	raw := append(first, title...)
	if _, err := m.Append(SegmentName(0), raw, 10); err != nil {
		t.Fatal(err)
	}
	whole := m.Info()
	if m.StaleSummary() || whole.Title != "a title" || whole.Usage.OutputTokens != 6 || whole.Project != project {
		t.Fatalf("fresh manifest: stale %v, info %+v", m.StaleSummary(), whole)
	}
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, older := range []struct {
		name    string
		version any // summary_version as the older writer wrote it (nil: none)
		dropped []string
	}{
		{"before summary_version", nil, []string{"title", "usage", "project"}},
		{"summary version 1", 1, []string{"project"}},
	} {
		t.Run(older.name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			log := doc["log"].(map[string]any)
			for _, k := range append([]string{"summary_version"}, older.dropped...) {
				if _, ok := log[k]; !ok {
					t.Fatalf("the encoded manifest has no %q: %s", k, data)
				}
				delete(log, k)
			}
			if older.version != nil {
				log["summary_version"] = older.version
			}
			old, _ := json.Marshal(doc)
			stale, err := Decode(old)
			if err != nil {
				t.Fatal(err)
			}
			if !stale.StaleSummary() || stale.Info().Project != (agent.Project{}) {
				t.Fatalf("an old writer's manifest: stale %v, info %+v", stale.StaleSummary(), stale.Info())
			}
			if Folded(stale.Info(), stale.SummaryVersion) != Folded(whole, stale.SummaryVersion) {
				t.Errorf("an old writer's summary differs from a whole one in what it folds: %+v, %+v", stale.Info(), whole)
			}
			if err := stale.Refold("x", raw[:len(raw)-1]); !errors.Is(err, ErrInvalid) {
				t.Errorf("refold from the wrong bytes: %v", err)
			}
			if err := stale.Refold("x", raw); err != nil {
				t.Fatal(err)
			}
			if stale.StaleSummary() || !reflect.DeepEqual(stale.Info(), whole) || stale.Decoder.Line != m.Decoder.Line {
				t.Fatalf("refolded: stale %v, info %+v, want %+v", stale.StaleSummary(), stale.Info(), whole)
			}
			again, err := Encode(stale)
			if err != nil || !bytes.Equal(again, data) {
				t.Errorf("the refolded manifest encodes differently (%v):\n%s\n%s", err, again, data)
			}
		})
	}
}

// TestEntryResumes: a manifest's index entry carries what an append
// needs, so that appending to the entry's manifest gives the same
// segment, hashes and summary as appending to the manifest itself; an
// entry whose state does not sum to its hash is not resumed from.
func TestEntryResumes(t *testing.T) {
	m, _ := sample(t)
	e := m.Entry()
	if !e.Resumable() || e.Resume.Segments != len(m.Segments) {
		t.Fatalf("entry of %d segments: %+v, resumable %v", len(m.Segments), e.Resume, e.Resumable())
	}
	// Through the wire, as a reader of the shard gets it.
	sh := NewIndexShard(ShardOf(m.ID))
	sh.Put(e)
	c, _ := NewCodec()
	data, err := c.EncodeIndexShard("index/x.json.zst", sh)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := c.DecodeIndexShard("index/x.json.zst", data)
	if err != nil || dec.Sessions[m.ID] != e {
		t.Fatalf("entry through the wire: %v %+v", err, dec.Sessions[m.ID])
	}
	more := batch(t, m.ID, false, "one more")
	full, part := m.Clone(), dec.Sessions[m.ID].Manifest(m.ID)
	want, err := full.Append("full", more, 10)
	if err != nil {
		t.Fatal(err)
	}
	got, err := part.Append("part", more, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || part.SHA256 != full.SHA256 || !bytes.Equal(part.HashState, full.HashState) || !reflect.DeepEqual(part.Info(), full.Info()) || part.Decoder.Line != full.Decoder.Line {
		t.Fatalf("appended to the entry's manifest: %+v %+v; to the manifest: %+v %+v", got, part.Info(), want, full.Info())
	}
	for name, bad := range map[string]func(e *IndexEntry){
		"another hash":     func(e *IndexEntry) { e.SHA256 = strings.Repeat("0", 64) },
		"a shorter length": func(e *IndexEntry) { e.Length-- },
		"a garbled state":  func(e *IndexEntry) { e.Resume.HashState = e.Resume.HashState[:20] },
		"an older summary": func(e *IndexEntry) { e.Resume.SummaryVersion = 0 },
		"no segments":      func(e *IndexEntry) { e.Resume.Segments = 0 },
	} {
		c := e
		bad(&c)
		if c.Resumable() {
			t.Errorf("%s: resumable", name)
		}
	}
}
