package backends_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/faultnet"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/backends"
	"github.com/panto-dev/panto/store/localfirst"
)

// TestLocalFirstFrozenAfterOpen: panto's local-first store counts the
// bucket's answers (objstore.WithOnAnswer into localfirst.Options.Answers),
// so that a listing of a bucket that stopped answering after Open, and
// has answered nothing of it in the short timeout, is given up and the
// store says it is offline. It waited the listing's 30 s, and the bucket
// still passed for online.
func TestLocalFirstFrozenAfterOpen(t *testing.T) {
	srv := miniotest.Shared(t)
	for _, kv := range srv.AWSEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	link := faultnet.New(t, srv.Endpoint())
	ctx := context.Background()
	var mu sync.Mutex
	var notes []string
	st, err := backends.Open(ctx, "s3://"+srv.NewBucket(t)+"/p", backends.Options{
		Endpoint: link.URL(), LocalFirst: true, Reading: true,
		// A stall is not what ends the wait: the connection would move
		// no byte for that long first.
		StallTimeout: time.Hour,
		Notify:       func(s string) { mu.Lock(); notes = append(notes, s); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	lf := st.(*localfirst.Store)
	if lf.Offline() {
		t.Fatal("the bucket did not answer Open")
	}
	if _, err := link.Add(faultnet.Fault{Type: "timeout", Attributes: map[string]int64{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := lf.List(ctx); err != nil {
		t.Fatalf("List of a frozen bucket: %v", err)
	}
	if !lf.Offline() {
		t.Errorf("the store is not offline after a listing the bucket answered nothing of (told %q)", notes)
	}
	link.Clear()
	if err := lf.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
