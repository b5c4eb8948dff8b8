package localfirst_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

// machine is one machine's local-first view of a bucket: its replica
// directory, and what it was told.
type machine struct {
	t       *testing.T
	srv     *miniotest.Server
	url     string
	dir     string
	mu      sync.Mutex
	notes   []string
	offline bool // its next Open finds the bucket unreachable
	// trace, when set, is told of every request to the bucket
	// (objstore.WithTrace).
	trace *slog.Logger
	// endpoint, when set, is where it reaches the server (a proxy).
	endpoint string
}

func newMachine(t *testing.T, srv *miniotest.Server, bucket string) *machine {
	return &machine{t: t, srv: srv, url: "s3://" + bucket + "/p", dir: t.TempDir()}
}

func (m *machine) openBucket(ctx context.Context) (store.LogStore, error) {
	if m.offline {
		return nil, fmt.Errorf("%w: cannot reach the S3 endpoint (test: offline)", objstore.ErrOpen)
	}
	endpoint := m.srv.Endpoint()
	if m.endpoint != "" {
		endpoint = m.endpoint
	}
	opts := []objstore.Option{objstore.WithEndpoint(endpoint), objstore.WithS3Options(m.srv.SetCredentials),
		objstore.WithIdleTimeout(time.Second)}
	if m.trace != nil {
		opts = append(opts, objstore.WithTrace(m.trace))
	}
	return objstore.Open(ctx, m.url, opts...)
}

func (m *machine) open() *localfirst.Store {
	m.t.Helper()
	s, err := localfirst.Open(context.Background(), localfirst.Options{
		Dir: m.dir, Name: m.url, OpenBucket: m.openBucket, Unreachable: objstore.IsUnreachable,
		// Generous: a loaded test machine must not pass for an unreachable
		// bucket (the frozen and dead ones fail fast or time out anyway).
		ReadTimeout: 10 * time.Second, CloseTimeout: 30 * time.Second, MaxBackoff: 200 * time.Millisecond,
		Notify: func(s string) { m.mu.Lock(); m.notes = append(m.notes, s); m.mu.Unlock() },
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return s
}

func (m *machine) told(word string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.notes {
		if strings.Contains(n, word) {
			return n
		}
	}
	return ""
}

func user(text string) agent.PersistentMessage {
	return agent.PersistentMessage{Message: agent.UserText(text)}
}

// texts are the user texts of session id in s, in order.
func texts(t *testing.T, s agent.SessionStore, id string) []string {
	t.Helper()
	conv, err := s.Load(context.Background(), id)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	var out []string
	for _, m := range conv.Messages {
		out = append(out, m.Text())
	}
	return out
}

func bucketStore(t *testing.T, m *machine) store.LogStore {
	t.Helper()
	b, err := m.openBucket(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func equal(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// TestShipsEveryAppendOnce: appends acknowledged by the replica reach the
// bucket, each exactly once and in order, by Close.
func TestShipsEveryAppendOnce(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	s := m.open()
	ctx := context.Background()
	sess := s.Create()
	var want []string
	for i := range 5 {
		text := fmt.Sprintf("prompt %d", i)
		want = append(want, text)
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := texts(t, bucketStore(t, m), sess.Info.ID); !equal(got, want) {
		t.Fatalf("the bucket holds %q, want %q", got, want)
	}
}

// TestDeadBucket: with the server killed, Open goes on, appends are kept,
// Close says what is left; once the server is back, the next Store sends
// it, exactly once.
func TestDeadBucket(t *testing.T) {
	t.Parallel()
	srv := miniotest.New(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	s := m.open()
	sess := s.Create()
	if err := sess.Append(ctx, []agent.PersistentMessage{user("online")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	s = m.open()
	resumed, err := s.Latest(ctx)
	if err != nil {
		t.Fatalf("Latest with the bucket down: %v", err)
	}
	for _, text := range []string{"offline 1", "offline 2"} {
		if err := resumed.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatalf("append with the bucket down: %v", err)
		}
	}
	if m.told("bucket unreachable: working from this machine's copy") == "" {
		t.Errorf("no offline notice (told %q)", m.notes)
	}
	err = s.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "2 messages not yet sent") {
		t.Fatalf("Close with the bucket down: %v, want it to say 2 messages are left", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close after the bucket came back: %v", err)
	}
	want := []string{"online", "offline 1", "offline 2"}
	if got := texts(t, bucketStore(t, m), sess.Info.ID); !equal(got, want) {
		t.Fatalf("the bucket holds %q, want %q", got, want)
	}
}

// TestDeadMidSession: a bucket that dies after Open refuses the append
// the shipper sends from its record; Close says what is left, the new
// message alone, not the session's every message, and the next Store
// sends it once.
func TestDeadMidSession(t *testing.T) {
	t.Parallel()
	srv := miniotest.New(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	s := m.open()
	sess := s.Create()
	for _, text := range []string{"sent 1", "sent 2", "sent 3"} {
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = m.open()
	resumed, err := s.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := resumed.Append(ctx, []agent.PersistentMessage{user("while dead")}); err != nil {
		t.Fatalf("append with the bucket down: %v", err)
	}
	err = s.Close(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "1 message not yet sent") {
		t.Fatalf("Close with the bucket down: %v, want it to say 1 message is left", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close after the bucket came back: %v", err)
	}
	want := []string{"sent 1", "sent 2", "sent 3", "while dead"}
	if got := texts(t, bucketStore(t, m), sess.Info.ID); !equal(got, want) {
		t.Fatalf("the bucket holds %q, want %q", got, want)
	}
}

// TestFrozenBucket: a bucket that accepts connections and never answers
// (SIGSTOP) holds neither Open nor an append; everything is sent once it
// answers again.
func TestFrozenBucket(t *testing.T) {
	t.Parallel()
	srv := miniotest.New(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	s := m.open()
	sess := s.Create()
	// These return while the server is still frozen: the test would hang
	// here otherwise.
	for _, text := range []string{"frozen 1", "frozen 2"} {
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			srv.Thaw()
			t.Fatal(err)
		}
	}
	if got := texts(t, s, sess.Info.ID); len(got) != 2 {
		srv.Thaw()
		t.Fatalf("the replica holds %q while the bucket is frozen", got)
	}
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close after thaw: %v", err)
	}
	if got := texts(t, bucketStore(t, m), sess.Info.ID); !equal(got, []string{"frozen 1", "frozen 2"}) {
		t.Fatalf("the bucket holds %q", got)
	}
}

// TestFrozenAtOpenClose: Close of a store whose Open found the bucket not
// answering (it accepts connections and never answers) waits for no
// other attempt to reach it: it says what is left at once, instead of
// holding the user while attempts time out.
func TestFrozenAtOpenClose(t *testing.T) {
	t.Parallel()
	srv := miniotest.New(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Thaw() })
	var mu sync.Mutex
	attempts := 0
	s, err := localfirst.Open(ctx, localfirst.Options{
		Dir: m.dir, Name: m.url, Unreachable: objstore.IsUnreachable,
		// The bucket is frozen: no wait is long enough for it.
		ReadTimeout: 500 * time.Millisecond, CloseTimeout: 5 * time.Minute,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			mu.Lock()
			attempts++
			mu.Unlock()
			return m.openBucket(ctx)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.Create()
	for _, text := range []string{"frozen 1", "frozen 2"} {
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
	}
	err = s.Close(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "2 messages not yet sent") {
		t.Fatalf("Close with the bucket frozen: %v, want it to say 2 messages are left", err)
	}
	mu.Lock()
	n := attempts
	mu.Unlock()
	if n != 1 {
		t.Errorf("the bucket was opened %d times, want once: Close waited for attempts after Open's", n)
	}
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := m.open().Close(ctx); err != nil {
		t.Fatalf("Close after the thaw: %v", err)
	}
	if got := texts(t, bucketStore(t, m), sess.Info.ID); !equal(got, []string{"frozen 1", "frozen 2"}) {
		t.Fatalf("the bucket holds %q", got)
	}
}

// TestSecondMachineContinues: another machine (another replica) continues
// the first one's session, and the first one sees its turn.
func TestSecondMachineContinues(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()
	id := a.newSessions("from a")[0]
	sb := b.open()
	onB, err := sb.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if onB.Info.ID != id {
		t.Fatalf("machine b continues %s, want %s", onB.Info.ID, id)
	}
	if err := onB.Append(ctx, []agent.PersistentMessage{user("from b")}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sa := a.open()
	defer sa.Close(ctx)
	if got := texts(t, sa, id); !equal(got, []string{"from a", "from b"}) {
		t.Fatalf("machine a reads %q", got)
	}
}

// TestLogsListsTheLongerCopy: a session another machine went on with
// since this machine read it is listed (Logs: what panto search and
// usage read) as the bucket holds it, its messages and when it was
// modified, not as this machine's copy last was: usage --since 30d left
// a session continued today elsewhere out, its copy here being months
// old, and search matched its old title. The listing of a session this
// machine is ahead on (its turn not yet sent) is its own copy's.
func TestLogsListsTheLongerCopy(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()
	ids := a.newSessions("from a", "also from a")
	sb := b.open()
	for _, id := range ids {
		if got := texts(t, sb, id); len(got) != 1 {
			t.Fatalf("machine b reads %q", got)
		}
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sa := a.open()
	onA, err := sa.Resolve(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := onA.Append(ctx, []agent.PersistentMessage{user("more from a")}); err != nil {
		t.Fatal(err)
	}
	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.offline = true
	sb = b.open()
	onB, err := sb.Resolve(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := onB.Append(ctx, []agent.PersistentMessage{user("from b, not yet sent")}); err != nil {
		t.Fatal(err)
	}
	_ = sb.Close(ctx) // offline: the turn stays to send
	b.offline = false
	sb = b.open()
	defer sb.Close(ctx)
	logs, err := sb.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]store.Log{}
	for _, l := range logs {
		byID[l.Info.ID] = l
	}
	if l := byID[ids[0]]; l.Info.MessageCount != 2 || !l.Info.Modified.After(byID[ids[1]].Info.Created) {
		t.Errorf("the session a went on with is listed with %d messages, modified %v; want 2, after the other's creation", l.Info.MessageCount, l.Info.Modified)
	}
	if l := byID[ids[1]]; l.Info.MessageCount != 2 {
		t.Errorf("the session b went on with offline is listed with %d messages, want 2", l.Info.MessageCount)
	}
}

// TestDivergedKeepsBoth: a machine appends offline while another appends
// to the same session: the first one's turns end in a new session linked
// to the original, the original holds the other's, on both sides, and the
// user is told which is which.
func TestDivergedKeepsBoth(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()
	sa := a.open()
	sess := sa.Create()
	if err := sess.Append(ctx, []agent.PersistentMessage{user("shared")}); err != nil {
		t.Fatal(err)
	}
	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	a.offline = true
	sa = a.open()
	onA, err := sa.Resolve(ctx, sess.Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := onA.Append(ctx, []agent.PersistentMessage{user("a offline")}); err != nil {
		t.Fatal(err)
	}
	sa.Close(ctx)

	sb := b.open()
	onB, err := sb.Resolve(ctx, sess.Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := onB.Append(ctx, []agent.PersistentMessage{user("b online")}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}

	a.offline = false
	sa = a.open()
	if err := sa.Close(ctx); err != nil {
		t.Fatalf("Close after the catch-up: %v", err)
	}
	note := a.told("also changed on another machine")
	if note == "" {
		t.Fatalf("machine a was not told of the conflict (told %q)", a.notes)
	}
	bs := bucketStore(t, a)
	if got := texts(t, bs, sess.Info.ID); !equal(got, []string{"shared", "b online"}) {
		t.Fatalf("the bucket's %s holds %q", sess.Info.ID, got)
	}
	list, err := bs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kept string
	for _, info := range list {
		if info.Parent == sess.Info.ID {
			kept = info.ID
		}
	}
	if kept == "" || !strings.Contains(note, kept) {
		t.Fatalf("no session linked to %s in the bucket, or not named in %q: %+v", sess.Info.ID, note, list)
	}
	if got := texts(t, bs, kept); !equal(got, []string{"shared", "a offline"}) {
		t.Fatalf("the kept copy %s holds %q", kept, got)
	}
	sa = a.open()
	defer sa.Close(ctx)
	if got := texts(t, sa.Replica(), sess.Info.ID); !equal(got, []string{"shared", "b online"}) {
		t.Fatalf("machine a's replica of %s holds %q", sess.Info.ID, got)
	}
	if got := texts(t, sa.Replica(), kept); !equal(got, []string{"shared", "a offline"}) {
		t.Fatalf("machine a's replica of %s holds %q", kept, got)
	}
}

// TestWrongAnswerFailsOpen: a bucket that answers wrongly (rejected
// credentials) fails Open in one line, unlike one that does not answer.
func TestWrongAnswerFailsOpen(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	url := "s3://" + srv.NewBucket(t) + "/p"
	_, err := localfirst.Open(context.Background(), localfirst.Options{
		Dir: t.TempDir(), Name: url, Unreachable: objstore.IsUnreachable, ReadTimeout: 30 * time.Second,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			return objstore.Open(ctx, url, objstore.WithEndpoint(srv.Endpoint()), objstore.WithS3Options(func(o *s3.Options) {
				srv.SetCredentials(o)
				o.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					return aws.Credentials{AccessKeyID: "wrong", SecretAccessKey: "wrong-secret"}, nil
				})
			}))
		},
	})
	if err == nil || !strings.Contains(err.Error(), "credentials rejected") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open with wrong credentials: %v", err)
	}
}
