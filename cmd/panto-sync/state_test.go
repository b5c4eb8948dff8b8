package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	key := remoteKey("s3://b/p", "http://127.0.0.1:9000")
	path := statePath(dir, key)
	if filepath.Dir(path) != filepath.Join(dir, ".panto-sync") {
		t.Errorf("state path %s is not under DIR/.panto-sync", path)
	}
	if statePath(dir, remoteKey("s3://b/p", "")) == path || statePath(dir, "s3://b/q") == statePath(dir, "s3://b/p") {
		t.Error("two remotes share a state file")
	}
	st := LoadState(path, key)
	if len(st.Sessions) != 0 {
		t.Fatal("missing state file is not empty")
	}
	st.Sessions["a"] = &SessionState{Size: 10, MtimeNS: 5, Committed: 9, SHA256: "ab", Hasher: []byte{1, 2}, Lines: 2,
		SyncedLength: 9, SyncedSHA256: "ab", Forks: []Fork{{Direction: "push", CopiedSHA256: "x", OtherSHA256: "y", NewID: "n"}}}
	if err := st.Save(path); err != nil {
		t.Fatal(err)
	}
	got := LoadState(path, key)
	if !reflect.DeepEqual(got, st) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, st)
	}
	// Another remote's state, or a corrupt file, is ignored.
	if len(LoadState(path, "s3://other").Sessions) != 0 {
		t.Error("state of another remote was used")
	}
	if err := os.WriteFile(path, []byte("{corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(LoadState(path, key).Sessions) != 0 {
		t.Error("corrupt state was used")
	}
	// No temp files are left behind.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("state dir holds %d files, want 1", len(entries))
	}
}

func FuzzLoadState(f *testing.F) {
	f.Add([]byte(`{"version":1,"remote":"r","sessions":{"a":{"size":1,"committed":1}}}`))
	f.Add([]byte(`{"version":1,"remote":"r","sessions":{"a":null}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "s.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		st := LoadState(path, "r")
		if st.Sessions == nil || st.Remote != "r" || st.Version != stateVersion {
			t.Fatalf("LoadState = %+v", st)
		}
		for id, s := range st.Sessions {
			if s == nil {
				t.Fatalf("session %q has no state", id)
			}
		}
	})
}
