package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/store"
)

// A push, pull or copy that found nothing to do keeps both sides'
// listing tokens (store.ListingTokener: the directory's file keys, the
// bucket's newest index commit as Open read it). The next run of the same
// command on the same sides and selection that finds the same two tokens
// has nothing to do either, and says so without listing either side:
// at 100,000 sessions a listing decodes the directory's summary cache
// and the bucket's catalog (2 s and 450 MB for a no-op sync), the tokens
// cost a stat per file and no request. Docs/DESIGN.md §6.

// unchangedTrust is how long a record spares the runs after it their
// listings: past it, a run lists both sides again whatever the tokens
// say, bounding how long a change no token sees (objects of a bucket
// restored by hand under the same index) goes unseen.
const unchangedTrust = 24 * time.Hour

// fullFlag is --full, which compares every session whatever the record.
func fullFlag() cli.Flag {
	return &cli.BoolFlag{Name: "full", Usage: "compare every session even when neither side changed since a run that found nothing to do (which is otherwise taken as is, for a day)"}
}

// noopRecord is what a run that found nothing to do left: both tokens,
// and its summary, which the runs it spares repeat.
type noopRecord struct {
	SrcToken string         `json:"src_token"`
	DstToken string         `json:"dst_token"`
	Sessions int            `json:"sessions"`
	Counts   map[string]int `json:"counts"`
	At       time.Time      `json:"at"`
}

// noopRecordPath is where the record of command d from src to dst, with
// o's selection, is kept ("" without a cache directory): one file per
// command, sides and selection, under $XDG_CACHE_HOME/panto/sync.
func noopRecordPath(o *options, d direction, src, dst end) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, part := range []string{d.cmd, sideName(src.spec), src.endpoint, src.keyFile, sideName(dst.spec), dst.endpoint, dst.keyFile,
		strings.Join(o.Include, "\x00"), strings.Join(o.Exclude, "\x00")} {
		fmt.Fprintf(h, "%q\n", part)
	}
	return filepath.Join(cache, "panto", "sync", hex.EncodeToString(h.Sum(nil))[:32]+".json")
}

// sideName is spec as one name whatever the working directory: a
// directory's absolute path.
func sideName(spec string) string {
	if s, err := store.ParseSpec(spec); err == nil && s.Kind == store.KindDir {
		if abs, err := filepath.Abs(s.Dir); err == nil {
			return abs
		}
	}
	return spec
}

// listingTokens returns both sides' listing tokens, taken before either
// is listed; ok is false when a side has none.
func listingTokens(ctx context.Context, from, to store.LogStore) (src, dst string, ok bool) {
	src, err := store.ListingToken(ctx, from)
	if err != nil || src == "" {
		return "", "", false
	}
	dst, err = store.ListingToken(ctx, to)
	if err != nil || dst == "" {
		return "", "", false
	}
	return src, dst, true
}

// unchangedSince returns the record at path when it names these tokens
// and is younger than unchangedTrust.
func unchangedSince(path, src, dst string, now time.Time) (noopRecord, bool) {
	var r noopRecord
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &r) != nil {
		return r, false
	}
	age := now.Sub(r.At)
	return r, r.SrcToken == src && r.DstToken == dst && age >= 0 && age < unchangedTrust
}

// foundNothing reports whether a run's summary is one that moved nothing
// and met no trouble: every session unchanged or skipped (held by the
// destination alone, or ahead there), both sides listed whole.
func foundNothing(s Summary) bool {
	if s.DryRun || s.ExitCode != exitOK || s.Failed > 0 || s.Diverged > 0 || s.Bytes > 0 {
		return false
	}
	for name, n := range s.Counts {
		if n > 0 && name != "unchanged" && name != "skipped" {
			return false
		}
	}
	return true
}

// saveNoop records, at path, that the run whose tokens were src and dst
// found nothing to do; removeNoop forgets it after any other run. Both
// are best effort: a record not written costs the next run its listing,
// and one not removed names tokens no later run will find again.
func saveNoop(path string, r noopRecord) {
	data, err := json.Marshal(r)
	if err != nil || os.MkdirAll(filepath.Dir(path), 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".noop-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}

func removeNoop(path string) { _ = os.Remove(path) }
