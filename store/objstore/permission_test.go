package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// The three roles of README.md's policies, on the prefix pfx/ of a
// bucket: a writer (no s3:ListBucket), a reader, and an administrator
// whose listing is confined to the prefix.
func writerPolicy(bucket string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:PutObject","s3:DeleteObject"],"Resource":["arn:aws:s3:::%s/pfx/*"]}]}`, bucket)
}

func readerPolicy(bucket string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::%s/pfx/*"]}]}`, bucket)
}

func adminPolicy(bucket string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:PutObject","s3:DeleteObject"],"Resource":["arn:aws:s3:::%[1]s/pfx/*"]},`+
		`{"Effect":"Allow","Action":["s3:ListBucket"],"Resource":["arn:aws:s3:::%[1]s"],"Condition":{"StringLike":{"s3:prefix":["pfx/*"]}}}]}`, bucket)
}

// openAs opens the env's store with the credentials of user (a view of
// the server from AsUser).
func (e *env) openAs(t *testing.T, user *miniotest.Server, opts ...objstore.Option) (*objstore.Store, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return objstore.Open(ctx, e.url, append([]objstore.Option{objstore.WithEndpoint(e.srv.Endpoint()), objstore.WithS3Options(user.SetCredentials)}, opts...)...)
}

// objectVersions is every object of the bucket with its ETag, read as
// the root user: what a refused write must leave as it was.
func (e *env) objectVersions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for key, data := range e.srv.Objects(t, e.bucket) {
		out[key] = fmt.Sprintf("%x", data)
	}
	return out
}

// checkPermissionError checks that err is the one-line permission error
// of op, naming the grant, and none of the SDK's dump.
func checkPermissionError(t *testing.T, err error, op, grant string) {
	t.Helper()
	var perm *objstore.PermissionError
	if !errors.Is(err, objstore.ErrPermission) || !errors.As(err, &perm) {
		t.Fatalf("error %v: want an objstore.PermissionError", err)
	}
	msg := err.Error()
	if perm.Op != op || !strings.Contains(msg, grant) {
		t.Errorf("error %q: want operation %s and %q", msg, op, grant)
	}
	for _, dump := range []string{"RequestID", "HostID", "https response error", "operation error", "\n"} {
		if strings.Contains(msg, dump) {
			t.Errorf("error %q holds the SDK's %q", msg, dump)
		}
	}
}

// TestReaderCannotWrite: credentials that may only read open the store
// and read it; each write is refused in one line that names the
// operation and the permission, and leaves every object as it was. A
// store that does not exist yet cannot be created by them, and another
// prefix cannot be opened.
func TestReaderCannotWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	s := e.open(t)
	id := agent.NewSessionID()
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("hello")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	reader := e.srv.AsUser(t, readerPolicy(e.bucket))
	r, err := e.openAs(t, reader)
	if err != nil {
		t.Fatalf("the reader's Open: %v", err)
	}
	if conv, err := r.Load(ctx, id); err != nil || conv.Messages[0].Text() != "hello" {
		t.Fatalf("the reader's Load: %v", err)
	}
	before := e.objectVersions(t)
	grant := func(perm string) string { return "grant " + perm + " on arn:aws:s3:::" + e.bucket + "/pfx/*" }
	writes := []struct {
		name  string
		write func() error
		op    string
		grant string
	}{
		{"append", func() error {
			return r.AppendMessages(ctx, id, []agent.PersistentMessage{user("more")})
		}, "PutObject", grant("s3:PutObject")},
		{"create", func() error {
			return r.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("new")})
		}, "PutObject", grant("s3:PutObject")},
		{"delete", func() error {
			at := mustLogs(t, r)[id].Checkpoint
			return r.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: at})
		}, "PutObject", grant("s3:PutObject")},
		{"compact", func() error { return r.Compact(ctx, id) }, "", ""},
	}
	for _, w := range writes {
		err := w.write()
		if w.op == "" {
			continue // nothing to write is no error
		}
		t.Run(w.name, func(t *testing.T) { checkPermissionError(t, err, w.op, w.grant) })
	}
	if after := e.objectVersions(t); !maps.Equal(before, after) {
		t.Errorf("refused writes changed the bucket:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}

	// A fresh prefix: the reader cannot create the store.
	fresh := &env{srv: e.srv, bucket: e.bucket, url: "s3://" + e.bucket + "/pfx/new"}
	_, err = fresh.openAs(t, reader)
	if !errors.Is(err, objstore.ErrOpen) || !strings.Contains(err.Error(), "holds no panto store yet") {
		t.Errorf("the reader's Open of a new prefix: %v", err)
	}
	checkPermissionError(t, err, "PutObject", "grant s3:PutObject on arn:aws:s3:::"+e.bucket+"/pfx/new/*")
	// Another prefix: refused at the first read.
	elsewhere := &env{srv: e.srv, bucket: e.bucket, url: "s3://" + e.bucket + "/other"}
	_, err = elsewhere.openAs(t, reader)
	if !errors.Is(err, objstore.ErrOpen) {
		t.Errorf("the reader's Open of another prefix: %v", err)
	}
	checkPermissionError(t, err, "GetObject", "grant s3:GetObject on arn:aws:s3:::"+e.bucket+"/other/*")
	if after := e.objectVersions(t); !maps.Equal(before, after) {
		t.Errorf("refused opens changed the bucket: %v", slices.Sorted(maps.Keys(after)))
	}
}
