package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/objstore"
)

// TestAppendThrottled: a segment PUT the server answers with 503 (a
// MinIO cluster missing a node answers SlowDownWrite for seconds) wrote
// nothing, so the append tries the same position again, for longer than
// a PUT that went unanswered (three tries, then a look): twelve refusals
// in a row still end in the append, once, at its position.
func TestAppendThrottled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	id := appendNew(t, e.open(t), "first")
	fb := e.faults(t)
	s := e.openOn(t, fb)
	var refused atomic.Int32
	fb.SetFault(func(op objstore.Op) error {
		if isPutOp(op, ".jsonl.zst") && refused.Add(1) <= 12 {
			return fmt.Errorf("%w: SlowDownWrite: Resource requested is unwritable", objstore.ErrThrottled)
		}
		return nil
	})
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("second")}); err != nil {
		t.Fatalf("append through 12 refusals: %v", err)
	}
	conv, err := e.open(t).Load(ctx, id)
	if err != nil || strings.Join(texts(conv), ",") != "first,second" {
		t.Fatalf("load: %v, %q", err, texts(conv))
	}
}

// TestClassifyThrottled: S3's answers that the server is busy are
// errThrottled, whatever the server calls them.
func TestClassifyThrottled(t *testing.T) {
	for _, code := range []string{"SlowDown", "SlowDownWrite", "SlowDownRead", "ServiceUnavailable"} {
		err := objstore.Classify(&smithy.GenericAPIError{Code: code, Message: "busy"})
		if !errors.Is(err, objstore.ErrThrottled) {
			t.Errorf("%s: %v, want ErrThrottled", code, err)
		}
	}
	if err := objstore.Classify(&smithy.GenericAPIError{Code: "InternalError"}); errors.Is(err, objstore.ErrThrottled) {
		t.Errorf("InternalError classified as throttled")
	}
}

// TestCompactionThrottled: a compaction whose PUTs the server refuses as
// busy is put off to the next checkpoint, not reported by Flush: the
// appends and their checkpoint are written, and the next checkpoint,
// once the server takes writes, compacts.
func TestCompactionThrottled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithCompactThreshold(2))
	var refused atomic.Int32
	fb.SetFault(func(op objstore.Op) error {
		if isPutOp(op, ".c.jsonl.zst") {
			refused.Add(1)
			return fmt.Errorf("%w: SlowDownWrite: Resource requested is unwritable", objstore.ErrThrottled)
		}
		return nil
	})
	id := agent.NewSessionID()
	for i := range 4 {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flush while the server refuses the compaction: %v", err)
	}
	if refused.Load() == 0 {
		t.Fatal("no compaction was tried")
	}
	fb.SetFault(nil)
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("m4")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	merged := 0
	for _, op := range fb.Take() {
		if isPutOp(op, ".c.jsonl.zst") && op.Err == nil {
			merged++
		}
	}
	if merged == 0 {
		t.Fatal("the next checkpoint did not compact")
	}
	conv, err := e.open(t).Load(ctx, id)
	if err != nil || strings.Join(texts(conv), ",") != "m0,m1,m2,m3,m4" {
		t.Fatalf("load: %v %q", err, texts(conv))
	}
}
