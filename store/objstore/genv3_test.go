package objstore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

func TestGenV3Fixture(t *testing.T) {
	if os.Getenv("GEN_V3") == "" {
		t.Skip()
	}
	ctx := context.Background()
	b := objstore.NewMemBucket("fixture", "pfx/")
	s, err := objstore.OpenBucket(ctx, b, objstore.WithManifestInterval(4))
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"0a5e1f2b3c4d5e6f708192a3b4c5d6e7", "0b77aa00112233445566778899aabbcc", "7d00d1234567890abcdef0123456789a", "c0ffee00112233445566778899aabbcc", "e1e2e3e4e5e6e7e8e9eaebecedeeeff0"}
	proj := agent.Project{Remote: "github.com/team/proj", Root: "/home/me/proj", Path: "cmd", Dir: "/home/me/proj/cmd"}
	for i, id := range ids {
		n := 2 + 3*i
		for j := 0; j < n; j++ {
			msgs := []agent.PersistentMessage{user("prompt " + id[:4] + " " + string(rune('a'+j))), msg(agent.RoleAssistant, "answer "+string(rune('a'+j)))}
			if i == 2 {
				err = s.AppendMessagesIn(ctx, proj, id, msgs)
			} else {
				err = s.AppendMessages(ctx, id, msgs)
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := s.Compact(ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	cps, err := s.Checkpoints(ctx, ids[4])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Tombstone{ID: ids[4], Deleted: time.Now().UTC(), At: cps[len(cps)-1]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	dir := "testdata/v3-bucket"
	for _, o := range objstore.MemObjects(b) {
		p := filepath.Join(dir, "bucket", filepath.FromSlash(o.Key[len("pfx/"):]))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, o.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.MarshalIndent(infos, "", "  ")
	os.WriteFile(filepath.Join(dir, "list.json"), data, 0o644)
	os.MkdirAll(filepath.Join(dir, "jsonl"), 0o755)
	for _, info := range infos {
		raw, err := readRaw(ctx, s, info.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "jsonl", info.ID+".jsonl"), raw, 0o644)
	}
}
