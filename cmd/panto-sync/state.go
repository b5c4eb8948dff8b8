package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// stateVersion is the version of the state file this binary writes; a
// file of another version is ignored (it is only a cache).
const stateVersion = 1

// State is the local state file of one (catalog, remote) pair:
// DIR/.panto-sync/<hash of the remote>.json. It is a cache that lets a
// run skip what has not changed, never a source of truth: a session
// whose file changed size or mtime is re-read (from where the cache
// left off), and the remote side always comes from the remote index.
//
// Local session files are append-only (store/fsjsonl only appends, and
// only cuts an uncommitted tail), so a file that grew keeps its old
// committed prefix: its hash is resumed from the marshalled sha256 state
// and only the new bytes are read. A file that shrank below its recorded
// committed length is re-read in full.
type State struct {
	Version  int                      `json:"version"`
	Remote   string                   `json:"remote"`
	Sessions map[string]*SessionState `json:"sessions"`
}

// SessionState is what the last run learnt about one session.
type SessionState struct {
	// Size and MtimeNS identify the file as last read; Size is -1 when
	// the file changed while it was read (so that it is read again).
	Size    int64 `json:"size"`
	MtimeNS int64 `json:"mtime_ns"`
	// Committed is the length of the file's committed prefix, SHA256 its
	// hash, Hasher the marshalled sha256 state after it, Lines its number
	// of lines.
	Committed int64  `json:"committed"`
	SHA256    string `json:"sha256"`
	Hasher    []byte `json:"hasher"`
	Lines     int    `json:"lines"`
	// SyncedLength and SyncedSHA256 are the last length at which local
	// and remote were known to hold the same bytes.
	SyncedLength int64  `json:"synced_length,omitempty"`
	SyncedSHA256 string `json:"synced_sha256,omitempty"`
	// Forks records the copies --on-diverge=keep-both made, so that a
	// re-run does not make another of the same divergence.
	Forks []Fork `json:"forks,omitempty"`
}

// Fork is one copy keep-both made: the side that was copied held
// CopiedSHA256 and the other side OtherSHA256; the copy is NewID.
type Fork struct {
	Direction    string `json:"direction"` // "push" (local copied to the remote) or "pull"
	CopiedSHA256 string `json:"copied_sha256"`
	OtherSHA256  string `json:"other_sha256"`
	NewID        string `json:"new_id"`
}

// statePath is where the state of dir against remote lives.
func statePath(dir, remote string) string {
	sum := sha256.Sum256([]byte(remote))
	return filepath.Join(dir, ".panto-sync", hex.EncodeToString(sum[:8])+".json")
}

// remoteKey names the remote of a state file: the URL, and the endpoint
// when one is given (the same bucket name on two servers is two remotes).
func remoteKey(url, endpoint string) string {
	if endpoint == "" {
		return url
	}
	return url + " @ " + endpoint
}

// LoadState reads the state file at path. A missing, unreadable or
// foreign file yields an empty state: the cache is rebuilt.
func LoadState(path, remote string) *State {
	st := &State{Version: stateVersion, Remote: remote, Sessions: map[string]*SessionState{}}
	data, err := os.ReadFile(path)
	if err != nil {
		return st
	}
	var got State
	if json.Unmarshal(data, &got) != nil || got.Version != stateVersion || got.Remote != remote || got.Sessions == nil {
		return st
	}
	for id, s := range got.Sessions {
		if s == nil {
			delete(got.Sessions, id)
		}
	}
	return &got
}

// Save writes the state atomically (temp file, fsync, rename), so that a
// crash leaves the old file or the new one.
func (st *State) Save(path string) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".state-*.tmp")
	if err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save sync state %s: %w", path, err)
	}
	return nil
}
