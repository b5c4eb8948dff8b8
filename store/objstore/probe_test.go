package objstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/miniotest"
	"github.com/panto-dev/panto/store/objstore"
)

// TestProbeRefusesLaxServers: Open refuses, in one line that names the
// behaviour, a server that ignores If-None-Match, one that ignores only
// If-Match, and one that answers NotImplemented; nothing is appended. Six
// handles appending to one session through a server that ignores the
// headers would keep a fraction of what they were told was stored.
func TestProbeRefusesLaxServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct{ mode, want string }{
		{miniotest.DropConditions, "If-Match"},
		{miniotest.DropIfMatch, "If-Match"},
		{miniotest.DropIfNoneMatch, "If-None-Match"},
		{miniotest.RefuseConditions, "NotImplemented"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			e := newEnv(t)
			lax, conditional := miniotest.LaxProxy(t, e.srv, tt.mode)
			// Twice: on a fresh prefix (the probe object is created by the
			// first Open) and on one that has it.
			for round := range 2 {
				_, err := objstore.Open(ctx, e.url, e.reach(objstore.WithEndpoint(lax))...)
				if !errors.Is(err, objstore.ErrConditionalWrites) || !errors.Is(err, objstore.ErrOpen) {
					t.Fatalf("round %d: Open through a %s server: %v, want ErrConditionalWrites", round, tt.mode, err)
				}
				if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) || !strings.Contains(msg, "use a server") {
					t.Errorf("round %d: the error does not say, in one line, what is wrong and what to do: %q", round, msg)
				}
			}
			if conditional.Load() == 0 {
				t.Fatal("the probe sent no conditional PUT")
			}
			// The honest server, on the same prefix, opens.
			s := e.open(t)
			if err := s.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("fine")}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
