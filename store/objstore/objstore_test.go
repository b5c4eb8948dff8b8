package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fixedClock returns a clock that advances by one second per call, from t0.
func fixedClock() func() time.Time {
	var n int64
	return func() time.Time { n++; return t0.Add(time.Duration(n) * time.Second) }
}

// env is a bucket, on a server or in memory. Stores reach a server's
// through explicit options (its endpoint and credentials), never the
// process's environment, so that tests can run in parallel.
type env struct {
	srv    *miniotest.Server // nil: the bucket is in memory (mem)
	mem    objstore.Bucket
	bucket string
	url    string
}

// newEnv is a fresh bucket on the shared MinIO.
func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvOn(t, miniotest.Shared(t))
}

// newEnvOn is a fresh bucket on srv.
func newEnvOn(t testing.TB, srv *miniotest.Server) *env {
	t.Helper()
	b := srv.NewBucket(t)
	return &env{srv: srv, bucket: b, url: "s3://" + b + "/pfx"}
}

// newMemEnv is a fresh bucket in memory, with the store under the same
// prefix as newEnv's: for the tests of the protocol, which need no server
// (TestBucketSemantics holds the memory bucket to the servers'
// semantics), and run in milliseconds.
func newMemEnv(t testing.TB) *env {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return &env{mem: objstore.NewMemBucket(name, "pfx/"), bucket: name, url: "mem://" + name + "/pfx"}
}

// reach are the options that point a store at the env's server; options
// after them win (WithEndpoint of a proxy, say).
func (e *env) reach(opts ...objstore.Option) []objstore.Option {
	if e.srv == nil {
		return opts
	}
	return append([]objstore.Option{objstore.WithEndpoint(e.srv.Endpoint()), objstore.WithS3Options(e.srv.SetCredentials)}, opts...)
}

func (e *env) open(t testing.TB, opts ...objstore.Option) *objstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := e.tryOpen(ctx, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", e.url, err)
	}
	return s
}

// tryOpen opens a store on the env's bucket, as open does, and returns
// the error.
func (e *env) tryOpen(ctx context.Context, opts ...objstore.Option) (*objstore.Store, error) {
	if e.mem != nil {
		return objstore.OpenBucket(ctx, e.mem, opts...)
	}
	return objstore.Open(ctx, e.url, e.reach(opts...)...)
}

// openOn opens a store on b, a wrapper of the env's memory bucket.
func (e *env) openOn(t testing.TB, b objstore.Bucket, opts ...objstore.Option) *objstore.Store {
	t.Helper()
	s, err := objstore.OpenBucket(t.Context(), b, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", e.url, err)
	}
	return s
}

// faults wraps the env's memory bucket to record operations and inject
// faults: open a store on it with openOn.
func (e *env) faults(t testing.TB) *objstore.FaultBucket {
	t.Helper()
	if e.mem == nil {
		t.Fatal("faults at the seam need a memory bucket (newMemEnv)")
	}
	return objstore.NewFaultBucket(e.mem)
}

// key is the key of rel, an object of the store, from the bucket's root.
func (e *env) key(rel string) string { return "pfx/" + rel }

func msg(role agent.Role, text string) agent.PersistentMessage {
	m := agent.Message{Role: role, Content: []agent.Block{agent.TextBlock(text)}}
	return agent.PersistentMessage{Message: m, Identity: agent.WireIdentity{
		APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://api.example.com", Model: "m1"}}
}

func user(text string) agent.PersistentMessage { return msg(agent.RoleUser, text) }

func texts(c *agent.Conversation) []string {
	var out []string
	for _, m := range c.Messages {
		out = append(out, m.Text())
	}
	return out
}

func TestAppendLoadListResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t, objstore.WithClock(fixedClock()))
	sess := s.Create()
	id := sess.Info.ID
	if _, err := s.Load(ctx, id); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("load of a new session: %v", err)
	}
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("hello"), msg(agent.RoleAssistant, "hi")}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("again")}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*objstore.Store{s, e.open(t)} {
		c, err := st.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(c); !reflect.DeepEqual(got, []string{"hello", "hi", "again"}) {
			t.Fatalf("loaded %q", got)
		}
		infos, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || infos[0].ID != id || infos[0].MessageCount != 3 || infos[0].LastUserMessage != "again" || infos[0].Model != "m1" {
			t.Fatalf("list %+v", infos)
		}
		r, err := st.Resolve(ctx, id[:6])
		if err != nil || r.Info.ID != id {
			t.Fatalf("resolve: %v %+v", err, r)
		}
		l, err := st.Latest(ctx)
		if err != nil || l.Info.ID != id {
			t.Fatalf("latest: %v", err)
		}
		if err := st.Verify(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// The bytes are those of the line codec, batch by batch.
	b1, _ := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{user("hello"), msg(agent.RoleAssistant, "hi")}, t0.Add(time.Second))
	b2, _ := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("again")}, t0.Add(2*time.Second))
	raw, err := readRaw(ctx, s, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(b1, b2...); !bytes.Equal(raw, want) {
		t.Fatalf("raw\n%s\nwant\n%s", raw, want)
	}
	tail, err := readRaw(ctx, s, id, int64(len(b1)+5))
	if err != nil || !bytes.Equal(tail, b2[5:]) {
		t.Fatalf("read from offset: %v %q", err, tail)
	}
	cps, err := s.Checkpoints(ctx, id)
	if err != nil || len(cps) != 2 || cps[0].Length != int64(len(b1)) || cps[1].Length != int64(len(b1)+len(b2)) {
		t.Fatalf("checkpoints %v %+v", err, cps)
	}
	if _, err := s.Resolve(ctx, "ffff"); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("resolve of nothing: %v", err)
	}
	if _, err := s.Resolve(ctx, "../x"); !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Fatalf("resolve ../x: %v", err)
	}
	if err := s.AppendMessages(ctx, "a/b", []agent.PersistentMessage{user("x")}); !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Fatalf("append to a/b: %v", err)
	}
}

// TestEscapingIDs: ids that would escape the session's directory are
// refused by every entry point, before any request.
func TestEscapingIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	s := e.openOn(t, fb)
	fb.Take()
	for _, id := range []string{"", "../x", "a/b", "/abs", "a\\b", ".", "x y", strings.Repeat("a", agent.MaxSessionIDLen+1)} {
		calls := map[string]error{
			"AppendMessages": s.AppendMessages(ctx, id, []agent.PersistentMessage{user("x")}),
			"AppendRaw":      appendRaw(ctx, s, id, 0, "", []byte("{}\n")),
			"Compact":        s.Compact(ctx, id),
			"Verify":         s.Verify(ctx, id),
		}
		_, calls["Load"] = s.Load(ctx, id)
		_, calls["Resolve"] = s.Resolve(ctx, id)
		_, calls["ReadRaw"] = readRaw(ctx, s, id, 0)
		_, calls["Checkpoints"] = s.Checkpoints(ctx, id)
		for name, err := range calls {
			if !errors.Is(err, agent.ErrInvalidSessionID) {
				t.Errorf("%s(%q): %v", name, id, err)
			}
		}
	}
	if ops := fb.Take(); len(ops) != 0 {
		t.Fatalf("invalid ids made %d requests", len(ops))
	}
}

// TestPutUnsignedOnLoopback: to the loopback MinIO, PUTs carry no payload
// hash (see payloadSigning), and MinIO takes them.
func TestPutUnsignedOnLoopback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	s := e.open(t, rec.option())
	sess := s.Create()
	if err := s.AppendMessages(context.Background(), sess.Info.ID, []agent.PersistentMessage{user("hello")}); err != nil {
		t.Fatal(err)
	}
	puts := 0
	for _, r := range rec.take() {
		if r.method == "PUT" {
			puts++
			if r.payload != "UNSIGNED-PAYLOAD" {
				t.Errorf("PUT %s: X-Amz-Content-Sha256 %q, want UNSIGNED-PAYLOAD", r.path, r.payload)
			}
		}
	}
	if puts == 0 {
		t.Error("no PUT recorded")
	}
}

// readRaw reads session id's raw bytes from offset from.
func readRaw(ctx context.Context, s *objstore.Store, id string, from int64) ([]byte, error) {
	r, _, err := s.ReadLog(ctx, id, from)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// appendRaw appends data to session id at the checkpoint (length, sha).
func appendRaw(ctx context.Context, s *objstore.Store, id string, length int64, sha string, data []byte) error {
	_, err := s.AppendLog(ctx, id, store.Checkpoint{Length: length, SHA256: sha}, data)
	return err
}

// sessionsOf is s.Logs by id.
func sessionsOf(ctx context.Context, s *objstore.Store) (map[string]store.Log, error) {
	logs, err := s.Logs(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]store.Log{}
	for _, l := range logs {
		m[l.Info.ID] = l
	}
	return m, nil
}
