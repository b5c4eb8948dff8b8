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
