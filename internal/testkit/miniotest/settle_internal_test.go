package miniotest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSettleWaitsForEveryNode: settle, which holds a cluster's tests
// back until its nodes agree, does not pass a cluster one of whose
// nodes cannot serve what the others acknowledge (here: it is down).
func TestSettleWaitsForEveryNode(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterNodes)
	if !strings.Contains(c.Settled(), "the nodes agreed") {
		t.Fatalf("the cluster started without settling: %q", c.Settled())
	}
	const killed = 1
	c.KillNode(killed)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	said, err := c.settle(ctx)
	if err == nil {
		t.Fatalf("settle passed a cluster with node %d down: %s", killed, said)
	}
	if !strings.Contains(err.Error(), "through node 0") || !strings.Contains(err.Error(), "node 1:") {
		t.Fatalf("settle's error does not say which node failed to serve what: %v", err)
	}
	t.Log(err)
}
