package objstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/objstore"
)

// batchOf is batch b of writer w: b%3+1 messages named "w<w>-b<b>-m<i>".
func batchOf(w, b int) []agent.PersistentMessage {
	var out []agent.PersistentMessage
	for i := 0; i < b%3+1; i++ {
		out = append(out, user(fmt.Sprintf("w%d-b%d-m%d", w, b, i)))
	}
	return out
}

// checkBatches: every batch of every writer is present exactly once, its
// messages contiguous and in order.
func checkBatches(t *testing.T, c *agent.Conversation, writers, batches int) {
	t.Helper()
	seen := map[string]bool{}
	msgs := texts(c)
	for i := 0; i < len(msgs); {
		var w, b, m int
		if _, err := fmt.Sscanf(msgs[i], "w%d-b%d-m%d", &w, &b, &m); err != nil || m != 0 {
			t.Fatalf("message %d %q does not start a batch", i, msgs[i])
		}
		for j, pm := range batchOf(w, b) {
			if i+j >= len(msgs) || msgs[i+j] != pm.Message.Text() {
				t.Fatalf("batch w%d-b%d is not contiguous at message %d: %q", w, b, i, msgs[i:min(len(msgs), i+5)])
			}
		}
		key := fmt.Sprintf("w%d-b%d", w, b)
		if seen[key] {
			t.Fatalf("batch %s appears twice", key)
		}
		seen[key] = true
		i += len(batchOf(w, b))
	}
	if len(seen) != writers*batches {
		t.Fatalf("%d batches present, want %d", len(seen), writers*batches)
	}
}

// TestRaceGoroutines: writers with a Store each (so they really race for
// segment positions) and writers sharing one Store append to one session.
func TestRaceGoroutines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	id := agent.NewSessionID()
	shared := e.open(t, objstore.WithCompactThreshold(5), objstore.WithCompactGrace(2*time.Second))
	const writers, batches = 6, 6
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	stores := []*objstore.Store{shared}
	for w := 0; w < writers; w++ {
		s := shared
		if w%2 == 0 {
			s = e.open(t, objstore.WithCompactThreshold(5), objstore.WithCompactGrace(2*time.Second))
			stores = append(stores, s)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				if err := s.AppendMessages(ctx, id, batchOf(w, b)); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range stores {
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fresh := e.open(t)
	c, err := fresh.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, c, writers, batches)
	if err := fresh.Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The index caught up with the last append.
	r, err := fresh.Resolve(ctx, id)
	if err != nil || r.Info.MessageCount != len(c.Messages) {
		t.Fatalf("index: %v %+v, want %d messages", err, r, len(c.Messages))
	}
}

// TestRaceProcesses: two OS processes (this test binary re-executed) and
// a goroutine of this one append to one session.
func TestRaceProcesses(t *testing.T) {
	t.Parallel()
	raceProcesses(t, newEnv(t))
}

// raceProcesses is TestRaceProcesses on e's server.
func raceProcesses(t *testing.T, e *env) {
	if os.Getenv("PANTO_OBJSTORE_CHILD") != "" {
		t.Skip("child")
	}
	ctx := context.Background()
	id := agent.NewSessionID()
	const batches = 8
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	// The children are bounded: past the deadline they are killed and
	// Wait returns.
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for w := 1; w <= 2; w++ {
		cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestChildAppender$", "-test.count=1")
		cmd.WaitDelay = 5 * time.Second
		// The child's harness takes AWS_* out of its environment: the
		// server is named in its own variables.
		cmd.Env = append(e.srv.Env(), "PANTO_OBJSTORE_CHILD=1", "CHILD_URL="+e.url, "CHILD_ID="+id,
			"CHILD_ENDPOINT="+e.srv.Endpoint(), "CHILD_ACCESS_KEY="+e.srv.AccessKey(), "CHILD_SECRET_KEY="+e.srv.SecretKey(),
			"CHILD_WRITER="+strconv.Itoa(w), "CHILD_BATCHES="+strconv.Itoa(batches))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	// All three compact as they go (threshold 4), racing each other's
	// manifest swaps too.
	s := e.open(t, objstore.WithCompactThreshold(4), objstore.WithCompactGrace(2*time.Second))
	for b := 0; b < batches; b++ {
		if err := s.AppendMessages(ctx, id, batchOf(0, b)); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i+1, err, outs[i])
		}
		if !strings.Contains(outs[i].String(), "appended") {
			t.Fatalf("child %d did not run:\n%s", i+1, outs[i])
		}
	}
	// Its compaction may still run, and delete the segments it replaced
	// 2 s later: a Verify slower than that (a loaded machine) would
	// find them gone after reading the manifest that names them.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := e.open(t)
	c, err := fresh.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, c, 3, batches)
	if err := fresh.Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// TestChildAppender is the child of TestRaceProcesses.
func TestChildAppender(t *testing.T) {
	if os.Getenv("PANTO_OBJSTORE_CHILD") == "" {
		t.Skip("run by TestRaceProcesses")
	}
	w, _ := strconv.Atoi(os.Getenv("CHILD_WRITER"))
	n, _ := strconv.Atoi(os.Getenv("CHILD_BATCHES"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	creds := objstore.WithS3Options(func(o *s3.Options) {
		o.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: os.Getenv("CHILD_ACCESS_KEY"), SecretAccessKey: os.Getenv("CHILD_SECRET_KEY")}, nil
		})
	})
	s, err := objstore.Open(ctx, os.Getenv("CHILD_URL"), objstore.WithEndpoint(os.Getenv("CHILD_ENDPOINT")), creds,
		objstore.WithCompactThreshold(4), objstore.WithCompactGrace(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < n; b++ {
		if err := s.AppendMessages(ctx, os.Getenv("CHILD_ID"), batchOf(w, b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("appended")
}
