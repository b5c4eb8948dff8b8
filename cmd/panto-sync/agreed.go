package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
)

// agreements is, per session, the checkpoint at which a push, pull, copy
// or watch between two sides last found both holding the same bytes. It
// judges a copy against the other side's tombstone
// (replica.Options.SrcCovered and DstCovered): a tombstone holds only the
// length and hash of what was deleted, so by its own rule any shorter
// copy is behind the deletion, and a turn written on this side while the
// other continued the session and deleted it would go with the deletion.
// A copy the record saw the other side hold whole is behind it; one it
// saw held only in part has bytes the other side never had, and is kept
// as a new session (docs/DESIGN.md §8, "Sync").
//
// The record is kept on disk, one file per pair of sides, shared by
// push, pull, copy and watch (agreement is the same whichever way a run
// copies), so that it outlives the run: a turn written while no sync
// ran is judged by it at the next. The file is a journal of lines
// "ID LENGTH SUM" (SUM: the first 16 hex digits of the hash), "ID !"
// (the two diverged) and "ID -" (forgotten), the last line of an id
// winning; it is rewritten
// whole when it holds more than twice the lines it needs. Losing a line
// (a crash, two runs at once) is safe: an older agreement makes the copy
// a conflict, kept both ways, and no agreement is the tombstone's rule,
// which is how every session was judged before the record was kept.
type agreements struct {
	path string // "": kept in memory only

	mu      sync.Mutex
	at      map[string]agreedAt
	pending bytes.Buffer // lines not yet in the file
}

// agreedAt is a checkpoint kept small: a watch mirrors every session of
// the bucket and keeps one of these for each (the map took 5.2 MB for
// 100,000 sessions beside their ids' 3.2 MB, where whole checkpoints,
// their hashes kept, took 12.7 MB). The first 8 bytes of the hash tell
// two logs of the same length apart but by chance; one taken for agreed
// by that chance is judged by the tombstone's rule.
type agreedAt struct {
	length int64
	sum    uint64
}

// diverged is the agreement of a session whose two copies diverged (a
// keep-both stores one as a new session and leaves both as they are):
// neither holds the other, so a deletion on one side covers only a copy
// the same as what it deleted. Forgotten instead, a shorter copy would be
// judged by length, and deleted with the turns it holds.
var diverged = agreedAt{length: -1}

func agreedOf(cp store.Checkpoint) agreedAt {
	a := agreedAt{length: cp.Length}
	if len(cp.SHA256) >= 16 {
		a.sum, _ = strconv.ParseUint(cp.SHA256[:16], 16, 64)
	}
	return a
}

// agreementsPath is where the record of the sides a and b is kept:
// $XDG_STATE_HOME/panto/sync/HASH.agreed, else under
// ~/.local/state; "" when there is neither. State, not cache: a record
// wiped with a cache would let a deletion take a turn it should keep.
func agreementsPath(a, b end) string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	sides := []string{sideName(a.spec) + "\x00" + a.endpoint, sideName(b.spec) + "\x00" + b.endpoint}
	slices.Sort(sides)
	h := sha256.Sum256([]byte(strings.Join(sides, "\x00\x00")))
	return filepath.Join(dir, "panto", "sync", hex.EncodeToString(h[:16])+".agreed")
}

// loadAgreements reads the record at path; a missing or unreadable file
// is an empty record, and a line that does not parse (a torn last line)
// is skipped.
func loadAgreements(path string) *agreements {
	a := &agreements{path: path, at: map[string]agreedAt{}}
	if path == "" {
		return a
	}
	f, err := os.Open(path)
	if err != nil {
		return a
	}
	defer f.Close()
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines++
		id, rest, ok := strings.Cut(sc.Text(), " ")
		if !ok || id == "" {
			continue
		}
		switch rest {
		case "-":
			delete(a.at, id)
			continue
		case "!":
			a.at[id] = diverged
			continue
		}
		length, sum, ok := strings.Cut(rest, " ")
		n, err1 := strconv.ParseInt(length, 10, 64)
		s, err2 := strconv.ParseUint(sum, 16, 64)
		if !ok || err1 != nil || err2 != nil || n <= 0 {
			continue
		}
		a.at[id] = agreedAt{length: n, sum: s}
	}
	if lines > 2*len(a.at)+1024 {
		a.rewrite()
	}
	return a
}

// note records what a push, pull or watch round found both sides to
// hold once the event's work was done (replica.Options.Report).
func (a *agreements) note(e replica.Event) {
	if e.DryRun {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch e.Kind {
	case replica.Created, replica.Appended, replica.Unchanged:
		if e.Plan.Src.Length == 0 {
			return
		}
		if at := agreedOf(e.Plan.Src); a.at[e.ID] != at {
			a.at[e.ID] = at
			fmt.Fprintf(&a.pending, "%s %d %016x\n", e.ID, at.length, at.sum)
		}
	case replica.Divergent, replica.KeptBoth:
		if a.at[e.ID] != diverged {
			a.at[e.ID] = diverged
			fmt.Fprintf(&a.pending, "%s !\n", e.ID)
		}
	case replica.Deleted:
		if _, ok := a.at[e.ID]; ok {
			delete(a.at, e.ID)
			fmt.Fprintf(&a.pending, "%s -\n", e.ID)
		}
	}
}

// covered says whether t, one side's tombstone of session id, covers the
// other side's copy at cp (replica.Options.SrcCovered and DstCovered):
// by t's rule when the record has never seen the two sides agree on the
// session, else only when they agreed on cp itself.
func (a *agreements) covered(id string, t store.Tombstone, cp store.Checkpoint) bool {
	a.mu.Lock()
	agreed, ok := a.at[id]
	a.mu.Unlock()
	return t.CoversHeld(cp, !ok || agreed == agreedOf(cp))
}

// save appends the lines noted since the last save to the file. It is
// best effort, as the record is (see agreements).
func (a *agreements) save() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.path == "" || a.pending.Len() == 0 {
		return
	}
	if err := os.MkdirAll(filepath.Dir(a.path), 0o700); err != nil {
		return
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	_, werr := f.Write(a.pending.Bytes())
	if cerr := f.Close(); werr == nil && cerr == nil {
		a.pending.Reset()
	}
}

// rewrite replaces the file with one line per agreement.
func (a *agreements) rewrite() {
	var b bytes.Buffer
	for id, at := range a.at {
		if at == diverged {
			fmt.Fprintf(&b, "%s !\n", id)
			continue
		}
		fmt.Fprintf(&b, "%s %d %016x\n", id, at.length, at.sum)
	}
	tmp, err := os.CreateTemp(filepath.Dir(a.path), ".agreed-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b.Bytes())
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), a.path) != nil {
		os.Remove(tmp.Name())
	}
}
