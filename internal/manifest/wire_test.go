package manifest

import (
	"bytes"
	"encoding/gob"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestWireGolden")

// filledInfo is a SessionInfo with every field set to a value of its own,
// found by reflection: a field added to agent.SessionInfo gets one too.
func filledInfo(id string) agent.SessionInfo {
	var info agent.SessionInfo
	v := reflect.ValueOf(&info).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(t0.Add(time.Duration(i) * time.Hour)))
		case f.Kind() == reflect.String:
			f.SetString(strings.ToLower(v.Type().Field(i).Name) + "-value")
		case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
			f.SetInt(int64(i + 1))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Struct: // of integers (agent.Usage) or strings (agent.Project)
			for j := 0; j < f.NumField(); j++ {
				if sf := f.Field(j); sf.Kind() == reflect.String {
					sf.SetString(strings.ToLower(f.Type().Field(j).Name) + "-value")
				} else {
					sf.SetInt(int64(100*(i+1) + j))
				}
			}
		default:
			panic("filledInfo: set field " + v.Type().Field(i).Name + " of kind " + f.Kind().String())
		}
	}
	info.ID = id
	return info
}

// TestWireGolden: the stored bytes of each document, with a summary whose
// every field is set, are those of testdata/golden. A field added to
// agent.SessionInfo (or any in-memory type) changes them only through a
// deliberate change to wire.go, which must come with an update of the
// golden files (go test ./internal/manifest -run Golden -update), of
// docs/DESIGN.md and, for an incompatible change, of Version.
func TestWireGolden(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sample(t)
	m.Decoder.Info = filledInfo(m.ID)
	m.Pending = []PendingDelete{{Name: SegmentName(7), After: t0.Add(time.Hour)}}
	man, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	sh := NewIndexShard(ShardOf(m.ID))
	sh.Through, sh.Pruned, sh.Purge, sh.Written = 32, 16, 24, t0
	sh.Put(m.Entry())
	compressed, err := c.EncodeIndexShard("index/x.json.zst", sh)
	if err != nil {
		t.Fatal(err)
	}
	shard, err := c.Decompress(compressed)
	if err != nil {
		t.Fatal(err)
	}
	// A log commit with every optional field, and a run page.
	entry := m.Entry()
	dirs := NewDirFilter()
	AddDirTo(dirs, "/src/a/cmd")
	commit := &IndexShard{Shard: LogName, Through: 40, Written: t0, Omitted: 300, DirHead: true, DirFilter: dirs, DirKeys: true, ClaimsSince: 12, Indexed: 100250, Base: 32, BaseETag: `"b"`,
		Recent:   map[string]IndexEntry{m.ID: entry},
		Unfolded: map[string]IndexEntry{m.ID: entry},
		Runs:     []RunPage{{Key: RunKeyPrefix + "9f86d081884c7d65-000.json.zst", First: "00", Last: "7f", Sessions: 256, Commit: 40}},
		Sessions: map[string]IndexEntry{}}
	page := &IndexShard{Shard: RunName, Sessions: map[string]IndexEntry{m.ID: entry}}
	listed := entry
	listed.Resume = Resume{}
	head := &IndexShard{Shard: HeadName, Written: t0, Complete: true, Sessions: map[string]IndexEntry{m.ID: listed},
		Claims: []string{"9c8b20f70eb7f585"}, Claimed: map[string]int64{"7b897b0bc456c6e7": 11},
		Tombstones: map[string]Tombstone{"0123456789abcdef0123456789abcdef": {ID: "0123456789abcdef0123456789abcdef", Deleted: t0, Length: 650, SHA256: entry.SHA256}}}
	docs := map[string][]byte{}
	for name, doc := range map[string]*IndexShard{"index-log-commit.json": commit, "index-run-page.json": page, "index-head.json": head} {
		compressed, err := c.EncodeIndexShard(name, doc)
		if err != nil {
			t.Fatal(err)
		}
		if docs[name], err = c.Decompress(compressed); err != nil {
			t.Fatal(err)
		}
	}
	for name, got := range map[string][]byte{
		"manifest.json":         man,
		"index-shard.json":      shard,
		"index-log-commit.json": docs["index-log-commit.json"],
		"index-run-page.json":   docs["index-run-page.json"],
		"index-head.json":       docs["index-head.json"],
		"marker.json":           EncodeMarker(Marker{Version: Version}),
	} {
		want, ok := golden(t, name, got)
		if ok && !bytes.Equal(got, want) {
			t.Errorf("%s changed:\n got %s\nwant %s\nA change of the stored format must be deliberate: see TestWireGolden's doc.", name, got, want)
		}
	}
}

// golden returns the stored bytes of testdata/golden/name; with -update
// it writes got there instead and reports false.
func golden(t *testing.T, name string, got []byte) ([]byte, bool) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return nil, false
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(want, []byte{'\n'}), true
}

// TestWireRoundTrip: every field of the summary survives the manifest and
// the index, so that a field added to agent.SessionInfo is either stored
// (a deliberate format change, see TestWireGolden) or listed here as one
// that is not.
func TestWireRoundTrip(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sample(t)
	m.Decoder.Info = filledInfo(m.ID)
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Info(), m.Info()) {
		t.Errorf("manifest summary round trip:\n got %+v\nwant %+v", back.Info(), m.Info())
	}
	sh := NewIndexShard(ShardOf(m.ID))
	sh.Put(m.Entry())
	enc, err := c.EncodeIndexShard("index/x.json.zst", sh)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := c.DecodeIndexShard("index/x.json.zst", enc)
	if err != nil {
		t.Fatal(err)
	}
	if got := dec.Sessions[m.ID].Info; !reflect.DeepEqual(got, m.Info()) {
		t.Errorf("index summary round trip:\n got %+v\nwant %+v", got, m.Info())
	}
}

// TestDecodeLenient: within version 3 a decoder ignores fields it does not
// know, in every document (a 3.x writer may add optional ones); the
// frozen layouts of versions 1 and 2 stay strict.
func TestDecodeLenient(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sample(t)
	good, _ := Encode(m)
	extra := strings.Replace(string(good), `{"version":3,`, `{"version":3,"future":{"x":[1,2]},`, 1)
	extra = strings.Replace(extra, `"start":0,`, `"start":0,"future":true,`, 1)
	got, err := Decode([]byte(extra))
	if err != nil {
		t.Fatalf("a v3 manifest with unknown fields: %v", err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("a v3 manifest with unknown fields decoded differently")
	}
	sh := NewIndexShard(ShardOf(m.ID))
	sh.Put(m.Entry())
	enc, _ := c.EncodeIndexShard("index/x.json.zst", sh)
	raw, _ := c.Decompress(enc)
	more := strings.Replace(string(raw), `"length":`, `"title":"t","length":`, 1)
	if _, err := c.DecodeIndexShard("index/x.json.zst", c.Compress([]byte(more))); err != nil {
		t.Errorf("a v3 shard with unknown fields: %v", err)
	}
	legacy := `{"version":2,"shard":"0","sessions":{},"future":1}`
	if _, err := c.DecodeIndexShard("index/x.json.zst", c.Compress([]byte(legacy))); err == nil {
		t.Errorf("a v2 shard with an unknown field was accepted")
	}
	newer := `{"version":4,"shard":"0","sessions":{}}`
	if _, err := c.DecodeIndexShard("index/x.json.zst", c.Compress([]byte(newer))); !errors.Is(err, ErrNewerVersion) {
		t.Errorf("a v4 shard: %v, want ErrNewerVersion", err)
	}
}

// TestLegacyDocuments decodes documents exactly as main wrote them in
// format 2 (from the fixture bucket of store/objstore).
func TestLegacyDocuments(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "store", "objstore", "testdata", "v2-bucket", "bucket")
	data, err := os.ReadFile(filepath.Join(dir, "sessions", "c0ffee00112233445566778899aabbcc", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(data)
	if err != nil {
		t.Fatalf("v2 manifest: %v", err)
	}
	if m.Length != 2693 || len(m.Segments) != 1 || !m.Segments[0].Merged || len(m.Pending) != 4 ||
		m.Info().MessageCount != 10 || m.Info().LastUserMessage != "compact me 4" || m.Info().Model != "claude-sonnet-4-5" || m.Decoder.Line != 11 {
		t.Errorf("v2 manifest decoded as %+v", m)
	}
	again, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Decode(again); err != nil || !reflect.DeepEqual(back, m) {
		t.Errorf("v2 manifest re-encoded as v3 does not decode the same: %v", err)
	}
	data, err = os.ReadFile(filepath.Join(dir, "index", "0.json.zst"))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := c.DecodeIndexShard("index/x.json.zst", data)
	if err != nil {
		t.Fatalf("v2 shard: %v", err)
	}
	if e, ok := sh.Sessions["0a5e1f2b3c4d5e6f708192a3b4c5d6e7"]; !ok || sh.Through != 16 || e.Length != 8433 || e.Info.MessageCount != 32 {
		t.Errorf("v2 shard decoded as %+v", sh)
	}
	if _, err := c.DecodeIndexShard("index/x.json.zst", c.Compress([]byte(`{"version":1,"shard":"a","sessions":{}}`))); err != nil {
		t.Errorf("v1 shard: %v", err)
	}
}

func TestMarker(t *testing.T) {
	m, err := DecodeMarker([]byte(`{"format":"panto-objstore","version":1}`))
	if err != nil || m.Version != 1 {
		t.Errorf("v1 marker: %+v, %v", m, err)
	}
	if m, err := DecodeMarker(EncodeMarker(Marker{Version: Version})); err != nil || m.Version != Version {
		t.Errorf("round trip: %+v, %v", m, err)
	}
	for data, want := range map[string]error{
		`{"format":"panto-objstore","version":4}`:                            ErrNewerVersion,
		`{"format":"panto-objstore","version":3,"requires":["time-travel"]}`: ErrNewerVersion,
		`{"format":"something-else","version":1}`:                            ErrNotMarker,
		`not json`: ErrNotMarker,
	} {
		if _, err := DecodeMarker([]byte(data)); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", data, err, want)
		}
	}
}

// TestCatalogForms: a catalog kept on disk (EncodeCatalog) decodes to
// what was encoded, plain and sealed; one an earlier version kept in the
// bucket's JSON form, or as one gob message, still decodes; damaged bytes, or another key's, do
// not.
func TestCatalogForms(t *testing.T) {
	plain, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sample(t)
	m.Decoder.Info = filledInfo(m.ID)
	doc := &IndexShard{Shard: LogName, Through: 9, Written: t0, Sessions: map[string]IndexEntry{m.ID: m.Entry()},
		Tombstones: map[string]Tombstone{"0123456789abcdef0123456789abcdef": {ID: "0123456789abcdef0123456789abcdef", Deleted: t0, Length: 3, SHA256: m.SHA256}}}
	for _, c := range []*Codec{plain, plain.WithSealer(testKey(t))} {
		gobForm, err := c.EncodeCatalog("catalog", doc)
		if err != nil {
			t.Fatal(err)
		}
		jsonForm, err := c.EncodeIndexShard("catalog", doc)
		if err != nil {
			t.Fatal(err)
		}
		// The form before the sessions went in chunks: one gob message.
		var whole bytes.Buffer
		whole.WriteString(catalogMagicWhole)
		if err := gob.NewEncoder(&whole).Encode(doc); err != nil {
			t.Fatal(err)
		}
		wholeForm := c.seal("catalog", c.Compress(whole.Bytes()))
		for name, data := range map[string][]byte{"gob": gobForm, "json": jsonForm, "gob in one message": wholeForm} {
			got, err := c.DecodeCatalog("catalog", bytes.Clone(data))
			if err != nil || !reflect.DeepEqual(got, doc) {
				t.Errorf("sealed %v, %s: %v\n got %+v\nwant %+v", c.Sealed(), name, err, got, doc)
			}
		}
		damaged := bytes.Clone(gobForm)
		damaged[len(damaged)/2] ^= 0xff
		if _, err := c.DecodeCatalog("catalog", damaged); err == nil {
			t.Errorf("sealed %v: a damaged catalog decoded", c.Sealed())
		}
	}
}

// TestPurgeNotes: a log commit's purge notes (Unpurged, Discarded)
// survive the encoding, in plain and sealed prefixes alike, and a
// document that misplaces or garbles them is refused.
func TestPurgeNotes(t *testing.T) {
	ids := []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"}
	page := RunKeyPrefix + "0a1b2c3d4e5f6a7b-000.json.zst"
	commit := &IndexShard{Shard: LogName, Through: 7, Sessions: map[string]IndexEntry{}, Unpurged: ids, Discarded: []string{page}}
	plain, sealed := sealedCodec(t)
	for name, c := range map[string]*Codec{"plain": plain, "sealed": sealed} {
		enc, err := c.EncodeIndexShard("index/log/7.json.zst", commit)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := c.DecodeIndexShard("index/log/7.json.zst", enc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(dec.Unpurged, ids) || !slices.Equal(dec.Discarded, []string{page}) {
			t.Errorf("%s: unpurged %v, discarded %v; want %v, %v", name, dec.Unpurged, dec.Discarded, ids, []string{page})
		}
	}
	bad := map[string]*IndexShard{
		"in a partition":  {Shard: "01", Sessions: map[string]IndexEntry{}, Unpurged: ids[:1]},
		"unsorted":        {Shard: LogName, Through: 7, Sessions: map[string]IndexEntry{}, Unpurged: []string{ids[1], ids[0]}},
		"twice":           {Shard: LogName, Through: 7, Sessions: map[string]IndexEntry{}, Unpurged: []string{ids[0], ids[0]}},
		"not an id":       {Shard: LogName, Through: 7, Sessions: map[string]IndexEntry{}, Unpurged: []string{"../x"}},
		"not a run page":  {Shard: LogName, Through: 7, Sessions: map[string]IndexEntry{}, Discarded: []string{"index/log/1.json.zst"}},
		"discarded pages": {Shard: "ab", Sessions: map[string]IndexEntry{}, Discarded: []string{page}},
	}
	for name, doc := range bad {
		if err := doc.validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
