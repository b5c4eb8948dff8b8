// Package miniotest runs real S3 servers for tests: S3 behaviour is
// tested against real servers, never a mock.
//
// What a test gets: a Server of any Kind (MinIO, a 4-node MinIO cluster,
// versitygw, gofakes3, or a lax proxy that mishandles conditional writes)
// on a free loopback port, with credentials of its own; its Endpoint, an
// Env for child processes (PATH, HOME, TMPDIR and the AWS variables,
// nothing else), SetCredentials for an in-process S3 client, a minio-go
// Client for setup and for reading a bucket back independently of the
// code under test, NewBucket for a bucket of the test's own, and Stop
// (Kill and Restart for fault tests; a Cluster's KillNode and RestartNode
// for one node). Matrix runs a subtest per kind that honours conditional
// writes (but the opt-in cluster, which tests name), Lax one per kind
// that panto must refuse; each Kind says what it Supports, as
// TestCapabilities measures it. Every server started is stopped however
// the test binary ends, and everything written lives under one temporary
// root that is removed with it (see Main).
//
// A test binary shares one server per kind, started on first use; its
// TestMain calls Main. Tests that stop or restart a server (fault tests)
// start their own with New or NewOf. A missing server binary fails the
// test with the command that installs it.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Region is the region of every test server.
const Region = "us-east-1"

// Server is a running S3 server.
type Server struct {
	// Kind is what runs behind the endpoint.
	Kind *Kind
	// Addr is host:port on loopback.
	Addr string

	accessKey, secretKey string
	proc                 *process  // a server process; nil for one in this process
	stop                 func()    // stops an in-process server
	nodes                []*Server // a cluster's nodes, whose logs LogOnFailure shows
	settled              string    // what a cluster's nodes did before they agreed (Cluster.settle)
}

// Endpoint is the server's URL.
func (s *Server) Endpoint() string { return "http://" + s.Addr }

// AccessKey and SecretKey are the server's credentials, random per
// server: a request that reaches another server on the same port (a
// clash of two test binaries) is refused, not served.
func (s *Server) AccessKey() string { return s.accessKey }

// SecretKey: see AccessKey.
func (s *Server) SecretKey() string { return s.secretKey }

// AWSEnv returns the standard AWS variables that point a child process
// at the server.
func (s *Server) AWSEnv() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.accessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.secretKey,
		"AWS_REGION=" + Region,
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint(),
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Env returns the whole environment of a child process that reaches the
// server: PATH, a new empty HOME (so that children of parallel tests share
// no ~/.aws or session directory), TMPDIR (the harness's root) and
// AWSEnv. Nothing else is inherited, so no credential source of the
// machine (AWS_PROFILE, web identity, container credentials) reaches the
// child.
func (s *Server) Env() []string {
	home, err := os.MkdirTemp("", "home-")
	if err != nil {
		home = os.TempDir()
		if h, err := active(); err == nil {
			home = h.home
		}
	}
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + os.TempDir(),
	}, s.AWSEnv()...)
}

// SetEnv points the standard AWS variables of this process at the server
// for the duration of the test. It uses t.Setenv, so the test cannot be
// parallel: prefer SetCredentials and an explicit endpoint.
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	for _, kv := range s.AWSEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Credentials returns the server's credentials for an AWS SDK client.
func (s *Server) Credentials() aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: s.accessKey, SecretAccessKey: s.secretKey, Source: "miniotest"}, nil
	})
}

// SetCredentials sets the server's credentials and region on the options
// of an S3 client (for objstore.WithS3Options), leaving the endpoint to
// the caller.
func (s *Server) SetCredentials(o *s3.Options) {
	o.Credentials = s.Credentials()
	o.Region = Region
}

// Client returns a minio-go client, for bucket setup and for reading the
// bucket back independently of the code under test.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := s.client()
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	return c
}

func (s *Server) client() (*minio.Client, error) {
	return minio.New(s.Addr, &minio.Options{
		Creds:  credentials.NewStaticV4(s.accessKey, s.secretKey, ""),
		Secure: false,
		Region: Region,
	})
}

// Objects reads every object of bucket back, by key, with minio-go: what
// a test scans for text that must not be there.
func (s *Server) Objects(t testing.TB, bucket string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.Client(t)
	out := map[string][]byte{}
	for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list %s: %v", bucket, obj.Err)
		}
		o, err := c.GetObject(ctx, bucket, obj.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", obj.Key, err)
		}
		b, err := io.ReadAll(o)
		o.Close()
		if err != nil {
			t.Fatalf("read %s: %v", obj.Key, err)
		}
		out[obj.Key] = b
	}
	return out
}

// NewBucket creates a bucket with a unique name and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := bucketName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Client(t).MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region})
	// minio-go retries a request whose answer was lost; the retry of a
	// create that did succeed is told the bucket is ours (a loaded
	// cluster does this). The name is random: no one else made it.
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		t.Fatalf("make bucket %s on %s: %v", name, s.Kind.Name, err)
	}
	return name
}

// bucketName is a valid, unique bucket name made of the test's name.
func bucketName(testName string) string {
	name := "panto-" + sanitize(testName) + "-" + randomHex(6)
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = "p" + strings.TrimLeft(name[1:], "-.")
	}
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Stop stops the server and removes its data.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.kill()
		os.RemoveAll(s.proc.dir)
	}
	if s.stop != nil {
		s.stop()
	}
}

// LogOnFailure shows, when t fails, what the server's processes (a
// cluster's nodes) printed last: what a server does under load (a drive
// marked offline, a lock lost) is in its log, which Stop removes.
func LogOnFailure(t testing.TB, s *Server) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			if s.settled != "" {
				t.Logf("%s on %s, as it started: %s", s.Kind.Name, s.Addr, s.settled)
			}
			t.Logf("%s on %s, last lines of its log:\n%s", s.Kind.Name, s.Addr, s.logTail(60))
		}
	})
}

func (s *Server) logTail(lines int) string {
	if len(s.nodes) > 0 {
		var b strings.Builder
		for i, n := range s.nodes {
			fmt.Fprintf(&b, "node %d (%s):\n%s\n", i, n.Addr, n.logTail(lines))
		}
		return b.String()
	}
	if s.proc == nil {
		return "(in the test process: no log)"
	}
	out, err := os.ReadFile(filepath.Join(s.proc.dir, "server.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Kill stops the server abruptly (SIGKILL to its process group), keeping
// its data, as a crash or a network outage would look to a client. Only
// a server process can be killed.
func (s *Server) Kill() {
	if s.proc == nil {
		panic("miniotest: Kill of a " + s.Kind.Name + " server, which is not one server process (a cluster's node: Cluster.KillNode)")
	}
	s.proc.kill()
}

// Restart starts a killed server again on the same address and data. It
// fails, rather than use another server, if something else took the port.
func (s *Server) Restart() error {
	if s.proc == nil {
		return fmt.Errorf("miniotest: a %s server cannot be restarted", s.Kind.Name)
	}
	err := s.proc.launch(s)
	if errors.Is(err, errPortTaken) {
		return fmt.Errorf("restart %s on %s: %w", s.Kind.Name, s.Addr, err)
	}
	return err
}

// shared holds the binary's shared server of each kind.
var (
	sharedMu sync.Mutex
	shared   = map[*Kind]*sharedServer{}
)

type sharedServer struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the test binary's shared MinIO, starting it on first use.
func Shared(t testing.TB) *Server { t.Helper(); return SharedOf(t, MinIO) }

// SharedOf returns the test binary's shared server of kind k, starting it
// on first use. A server that cannot start fails every test that asks.
func SharedOf(t testing.TB, k *Kind) *Server {
	t.Helper()
	s, err := sharedOf(k)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return s
}

func sharedOf(k *Kind) (*Server, error) {
	sharedMu.Lock()
	ss := shared[k]
	if ss == nil {
		ss = &sharedServer{}
		shared[k] = ss
	}
	sharedMu.Unlock()
	ss.once.Do(func() { ss.srv, ss.err = Start(k) })
	return ss.srv, ss.err
}

// stopShared stops every shared server (Main, after the tests).
func stopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for _, ss := range shared {
		if ss.srv != nil {
			ss.srv.Stop()
		}
	}
}

// New starts a MinIO of the test's own, stopped when the test ends.
func New(t testing.TB) *Server { t.Helper(); return NewOf(t, MinIO) }

// NewOf starts a server of kind k of the test's own, stopped when the
// test ends.
func NewOf(t testing.TB, k *Kind) *Server {
	t.Helper()
	s, err := Start(k)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Start starts a server of kind k; the caller stops it.
func Start(k *Kind) (*Server, error) {
	if _, err := active(); err != nil {
		return nil, err
	}
	s := newServer(k)
	if err := k.start(s); err != nil {
		return nil, fmt.Errorf("start %s: %w", k.Name, err)
	}
	return s, nil
}

// newServer is a server of kind k, not started, with credentials of its
// own.
func newServer(k *Kind) *Server {
	return &Server{Kind: k, accessKey: "panto-" + randomHex(6), secretKey: randomHex(16)}
}

// Pid is the server's process id, or 0 for a server in the test process.
func (s *Server) Pid() int {
	if s.proc == nil {
		return 0
	}
	s.proc.mu.Lock()
	defer s.proc.mu.Unlock()
	if s.proc.cmd == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}
