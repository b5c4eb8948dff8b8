package objstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// TestWriterDeletesWithoutListing: a writer whose policy has no
// s3:ListBucket deletes a session — segments probed past the manifest,
// listed ones, merged ones and those compaction left to delete — and
// nothing of it is left, while the other sessions stay whole; its
// listing is refused, and said so in one line.
func TestWriterDeletesWithoutListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	writer := e.srv.AsUser(t, writerPolicy(e.bucket))
	s, err := e.openAs(t, writer, objstore.WithManifestInterval(2), objstore.WithCompactThreshold(0), objstore.WithCompactGrace(time.Hour))
	if err != nil {
		t.Fatalf("the writer's Open: %v", err)
	}
	id := agent.NewSessionID()
	other := agent.NewSessionID()
	for _, text := range slices.Concat(secretTexts, secretTexts, secretTexts) { // 6 segments: compaction lists the 5 it replaces
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(text), msg(agent.RoleAssistant, "noted "+text)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, id); err != nil { // merged segments, and pending deletes
		t.Fatal(err)
	}
	for _, text := range secretTexts { // segments past the manifest
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendMessages(ctx, other, []agent.PersistentMessage{user("keep me")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := e.scanFor(t, secretTexts...); len(hits) < 4 {
		t.Fatalf("test setup: the secrets are in only %d objects", len(hits))
	}

	d, err := e.openAs(t, writer)
	if err != nil {
		t.Fatal(err)
	}
	deleteAll(t, d, id)
	if hits := e.scanFor(t, secretTexts...); len(hits) > 0 {
		t.Errorf("after the writer's deletion these objects still hold the session's text: %v", hits)
	}
	if _, err := d.Load(ctx, id); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("Load of the deleted session: %v", err)
	}
	if conv, err := d.Load(ctx, other); err != nil || conv.Messages[0].Text() != "keep me" {
		t.Errorf("the other session: %v", err)
	}
	_, err = d.CheckIndex(ctx)
	checkPermissionError(t, err, "ListObjectsV2", "grant s3:ListBucket on arn:aws:s3:::"+e.bucket+" with the condition s3:prefix = pfx/*")
	// An administrator of the prefix finds nothing to repair.
	admin, err := e.openAs(t, e.srv.AsUser(t, adminPolicy(e.bucket)))
	if err != nil {
		t.Fatal(err)
	}
	if report, err := admin.RepairIndex(ctx); err != nil || !report.Clean() {
		t.Errorf("the administrator's repair after the writer's deletion: %+v, %v", report, err)
	}
}

// TestWriterFinishesCutShortDeletion: a deletion cut short after its
// commit point, finished by a writer that may not list, deletes what the
// session's manifest still names, buries the session, and says in one
// line that listing would have been needed to be sure, and which
// permission; an administrator's repair then finds nothing left.
func TestWriterFinishesCutShortDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	writer := e.srv.AsUser(t, writerPolicy(e.bucket))
	s, err := e.openAs(t, writer, objstore.WithManifestInterval(2))
	if err != nil {
		t.Fatal(err)
	}
	id := agent.NewSessionID()
	for range 5 {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(secretTexts[0])}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	at := mustLogs(t, s)[id].Checkpoint
	// The deletion stops at its first delete: the commit point and seg/0
	// hold tombstones, every other object is still there.
	var fb *objstore.FaultBucket
	wrap := func(b objstore.Bucket) objstore.Bucket { fb = objstore.NewFaultBucket(b); return fb }
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cut, err := objstore.OpenWrapped(octx, e.url, wrap, objstore.WithEndpoint(e.srv.Endpoint()), objstore.WithS3Options(writer.SetCredentials), objstore.WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	fb.SetFault(func(op objstore.Op) error {
		if op.Method == "DELETE" || op.Method == "DELETES" {
			return objstore.ErrInjected
		}
		return nil
	})
	if err := cut.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: at}); err == nil {
		t.Fatal("test setup: the deletion was not cut short")
	}
	if hits := e.scanFor(t, secretTexts[0]); len(hits) == 0 {
		t.Fatal("test setup: the cut deletion left no content")
	}

	w, err := e.openAs(t, writer)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: at})
	checkPermissionError(t, err, "ListObjectsV2", "grant s3:ListBucket on arn:aws:s3:::"+e.bucket+" with the condition s3:prefix = pfx/*")
	if !strings.Contains(err.Error(), "is deleted, but what a deletion cut short may have left under") {
		t.Errorf("error %q does not say what could not be cleaned", err)
	}
	if hits := e.scanFor(t, secretTexts[0]); len(hits) > 0 {
		t.Errorf("the manifest named these objects, still there: %v", hits)
	}
	tombs, err := w.Tombstones(ctx)
	if err != nil || !slices.ContainsFunc(tombs, func(tb store.Tombstone) bool { return tb.ID == id }) {
		t.Errorf("the session is not buried: %v, %v", tombs, err)
	}
	// Once buried, deleting it again is quiet: the deletion went through.
	if err := w.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: at}); err != nil {
		t.Errorf("Delete of a buried session: %v", err)
	}
	admin, err := e.openAs(t, e.srv.AsUser(t, adminPolicy(e.bucket)))
	if err != nil {
		t.Fatal(err)
	}
	if report, err := admin.RepairIndex(ctx); err != nil || !report.Clean() {
		t.Errorf("the administrator's repair: %+v, %v", report, err)
	}
}
