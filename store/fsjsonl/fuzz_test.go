package fsjsonl_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/gobmap"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// FuzzListCache feeds arbitrary bytes to the summary cache
// (.panto-index, and an earlier version's .panto-index.json) of a
// catalog whose files are always the same: a
// cache that is damaged, foreign, of another version, or that names
// sessions, lengths and hashes that are not the files' never changes what
// the catalog lists. Logs lists exactly the files, each with the length
// and sha256 of its committed bytes and the summary a fresh read folds,
// and after Flush the cache it writes lists the same.
//
// No cache entry can match a file's stat key by chance (inode and ctime
// in ns), so every file is read and hashed in full. One whose cached
// prefix still hashes to the cached sha256 is decoded from there on, from
// the cached decoder state, which nothing checks (that is what saves the
// decode): for such a file only the checkpoint is compared. The seeds
// hold such prefixes, so that the fuzzer reaches the resumed path.
//
// The seed corpus is in testdata/fuzz/FuzzListCache; seeds made at run
// time are the caches of the same files, written by the store itself.
func FuzzListCache(f *testing.F) {
	files := cacheFiles(f, false)
	want := truth(f, files)
	// The cache the store writes of the files' first batches: when the
	// fuzzer leaves it whole, each file grew past it and is resumed.
	prefixes := map[string][]byte{}
	for name, data := range files {
		prefixes[name] = data[:firstBatch(data)]
	}
	f.Add(cacheOf(f, prefixes))
	// The cache of other first batches (the files edited below what
	// was cached): its prefixes do not hash the same, so nothing of it
	// may be used.
	edited := map[string][]byte{}
	for name, data := range cacheFiles(f, true) {
		edited[name] = data[:firstBatch(data)]
	}
	f.Add(cacheOf(f, edited))
	f.Add([]byte(`{"version":4,"log_version":1,"sessions":null}`))
	f.Fuzz(func(t *testing.T, cache []byte) {
		// As this version's cache, and as an earlier version's (JSON).
		for _, file := range []string{fsjsonl.IndexFile, fsjsonl.LegacyIndexFile} {
			checkListCache(t, files, want, file, cache)
		}
	})
}

// checkListCache is FuzzListCache's check of one cache, kept in the
// catalog directory as file.
func checkListCache(t *testing.T, files map[string][]byte, want map[string]store.Log, file string, cache []byte) {
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, file), cache, 0o600); err != nil {
		t.Fatal(err)
	}
	// A summary resumed from the fuzzed cache's state stays what it
	// is in the cache Flush writes, too.
	resumable := resumablePrefixes(cache, files)
	for round := range 2 { // with the fuzzed cache, then with the one Flush wrote
		s, err := fsjsonl.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		logs, err := s.Logs(t.Context())
		if err != nil {
			t.Fatalf("round %d: Logs: %v", round, err)
		}
		got := map[string]store.Log{}
		for _, l := range logs {
			l.Info.Created, l.Info.Modified = l.Info.Created.UTC(), l.Info.Modified.UTC()
			if resumable[l.Info.ID] {
				l.Info = want[l.Info.ID].Info
			}
			got[l.Info.ID] = l
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: the cache changed what is listed:\n got %+v\nwant %+v", round, got, want)
		}
		if err := s.Flush(t.Context()); err != nil {
			t.Fatalf("round %d: Flush: %v", round, err)
		}
	}
}

// resumablePrefixes are the sessions for which cache names a prefix of
// the file (its length and sha256): those the store resumes from the
// cached decoder state.
func resumablePrefixes(cache []byte, files map[string][]byte) map[string]bool {
	var c struct {
		Sessions map[string]*struct {
			Committed int64
			SHA256    string
		}
	}
	out := map[string]bool{}
	if doc, ok := bytes.CutPrefix(cache, []byte("panto-index-gob-2\n")); ok {
		dec := gob.NewDecoder(bytes.NewReader(doc))
		var head struct{ Version int }
		if dec.Decode(&head) != nil {
			return out
		}
		sessions, err := gobmap.Decode[string, *struct {
			Committed int64
			SHA256    string
		}](dec)
		if err != nil {
			return out
		}
		c.Sessions = sessions
	} else if doc, ok := bytes.CutPrefix(cache, []byte("panto-index-gob\n")); ok {
		if gob.NewDecoder(bytes.NewReader(doc)).Decode(&c) != nil {
			return out
		}
	} else if json.Unmarshal(cache, &c) != nil {
		return out
	}
	for id, e := range c.Sessions {
		data := files[id+fsjsonl.Ext]
		if e == nil || e.Committed <= 0 || e.Committed > int64(len(data)) {
			continue
		}
		if sum := sha256.Sum256(data[:e.Committed]); hex.EncodeToString(sum[:]) == e.SHA256 {
			out[id] = true
		}
	}
	return out
}

// cacheOf is the cache the store writes of a catalog of files.
func cacheOf(f *testing.F, files map[string][]byte) []byte {
	dir := f.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			f.Fatal(err)
		}
	}
	s, err := fsjsonl.Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.Logs(f.Context()); err != nil {
		f.Fatal(err)
	}
	if err := s.Flush(f.Context()); err != nil {
		f.Fatal(err)
	}
	cache, err := os.ReadFile(filepath.Join(dir, fsjsonl.IndexFile))
	if err != nil {
		f.Fatal(err)
	}
	return cache
}

// cacheFiles are the catalog of FuzzListCache: two sessions of two
// batches each, bytes fixed (clock and ids); edited gives the first
// batch's answer token counts, which the summary adds up.
func cacheFiles(f *testing.F, edited bool) map[string][]byte {
	files := map[string][]byte{}
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"} {
		var data []byte
		for i, text := range []string{"first", "second"} {
			answer := agent.PersistentMessage{Message: agent.AssistantText(text + " answer"), Identity: agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, Model: "m"}}
			if edited && i == 0 {
				answer.Usage = &agent.Usage{InputTokens: 1000, OutputTokens: 7}
			}
			b, err := sessionlog.EncodeBatch(id, i == 0, []agent.PersistentMessage{
				{Message: agent.UserText(text + " question")},
				answer,
			}, t0)
			if err != nil {
				f.Fatal(err)
			}
			data = append(data, b...)
		}
		files[id+fsjsonl.Ext] = data
	}
	return files
}

// truth is what a catalog of files lists, folded from the bytes alone.
func truth(f *testing.F, files map[string][]byte) map[string]store.Log {
	want := map[string]store.Log{}
	for _, data := range files {
		log, err := sessionlog.Parse("truth", data)
		if err != nil {
			f.Fatal(err)
		}
		sum := sha256.Sum256(data)
		info := log.Info
		info.Created, info.Modified = info.Created.UTC(), info.Modified.UTC()
		want[info.ID] = store.Log{Info: info, Checkpoint: store.Checkpoint{Length: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}}
	}
	return want
}

// firstBatch is the length of a log's first batch (its header says how
// many lines follow it).
func firstBatch(data []byte) int {
	lines := 0
	for i, c := range data {
		if c == '\n' {
			if lines++; lines == 3 {
				return i + 1
			}
		}
	}
	return len(data)
}
