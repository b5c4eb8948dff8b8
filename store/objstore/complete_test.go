package objstore_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/panto-dev/panto/agent"
)

// TestListNewestSmallIndex: an index whose recent view holds every
// session (Complete) answers a page longer than it, and a filter that
// matches few, from the newest commit: no partition is read. A deletion
// keeps it complete; past RecentSize sessions it is not, and a page
// longer than the view reads the partitions.
func TestListNewestSmallIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	var ids []string
	for i := range 5 {
		id := agent.NewSessionID()
		ids = append(ids, id)
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("q" + string(rune('a'+i)))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deleteAll(t, w, ids[0])
	want, err := e.open(t).List(ctx)
	if err != nil || len(want) != 4 {
		t.Fatalf("list: %v, %d sessions", err, len(want))
	}
	fb := e.faults(t)
	r := e.openOn(t, fb)
	fb.Take()
	page, err := r.ListNewest(ctx, 50, nil)
	if err != nil || !reflect.DeepEqual(page, want) {
		t.Fatalf("a page of 50 of a small index: %v, %v, want %v", err, infoIDs(page), infoIDs(want))
	}
	few, err := r.ListNewest(ctx, 50, func(s agent.SessionInfo) bool { return s.ID == ids[2] })
	if err != nil || len(few) != 1 || few[0].ID != ids[2] {
		t.Fatalf("a filter matching one: %v, %v", err, infoIDs(few))
	}
	if got := partitionReads(fb.Take()); got != 0 {
		t.Errorf("a small index read %d partitions for a page, want none", got)
	}
}
