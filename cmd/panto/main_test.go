package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/backends"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// pantoBin is the binary under test and syncBin panto-sync, built once by
// TestMain.
var pantoBin, syncBin string

func TestMain(m *testing.M) { miniotest.Main(m, buildBinaries) }

// buildBinaries builds panto and panto-sync under the harness's temporary
// root, which Main removes with everything else however the binary ends,
// with the race detector when the tests run under it (cmdtest.Build).
func buildBinaries() error {
	dir, err := os.MkdirTemp("", "panto-bin-")
	if err != nil {
		return err
	}
	pantoBin = filepath.Join(dir, "panto")
	syncBin = filepath.Join(dir, "panto-sync")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := cmdtest.Build(ctx, dir, ".", "../panto-sync"); err != nil {
		return fmt.Errorf("build panto and panto-sync: %w", err)
	}
	return nil
}

// The keys the fake servers accept; they must never reach a store.
const (
	openaiKey    = "sk-fake-openai-key-7f3a9c1e5b"
	anthropicKey = "sk-ant-fake-anthropic-key-2d8e4b6a"
)

// backend is a store under test: its spec, the environment panto needs to
// reach it, and a way to read back every stored byte.
type backend struct {
	name string
	spec string
	env  []string
	// bytes returns every stored byte (object store segments
	// decompressed), for scanning.
	bytes func(t *testing.T) []byte
	// bytesBut is bytes without the objects skip names (nil: the store
	// has no objects, only files).
	bytesBut func(t *testing.T, skip func(key string) bool) []byte
	open     func(t *testing.T) agent.SessionStore
	// openAt opens the store with its clock, which stamps the lines
	// written, set to clock.
	openAt func(t *testing.T, clock func() time.Time) agent.SessionStore
}

// storeEnv points panto at the backend's store.
func (b backend) storeEnv() []string { return append([]string{"PANTO_STORE=" + b.spec}, b.env...) }

// backendKinds are the stores every end-to-end test runs against.
var backendKinds = []struct {
	name string
	make func(t *testing.T) backend
}{{"fs", fsBackend}, {"s3", s3Backend}}

// fsBackend is a fresh FS store.
func fsBackend(t *testing.T) backend {
	dir := filepath.Join(t.TempDir(), "sessions")
	fsb := backend{
		name:  "fs",
		spec:  dir,
		bytes: dirBytes(dir),
	}
	fsb.open = func(t *testing.T) agent.SessionStore { return openStoreForTest(t, fsb.spec, "") }
	fsb.openAt = func(t *testing.T, clock func() time.Time) agent.SessionStore {
		st, err := fsjsonl.Open(dir, fsjsonl.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	return fsb
}

// s3Backend is a fresh bucket on the shared MinIO.
func s3Backend(t *testing.T) backend {
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	s3b := backend{
		name:  "s3",
		spec:  "s3://" + bucket + "/panto",
		env:   minioEnv(srv),
		bytes: bucketBytes(srv, bucket),
		bytesBut: func(t *testing.T, skip func(key string) bool) []byte {
			return bucketBytesBut(srv, bucket, skip)(t)
		},
	}
	s3b.openAt = func(t *testing.T, clock func() time.Time) agent.SessionStore {
		st, err := objstore.Open(t.Context(), s3b.spec, objstore.WithEndpoint(srv.Endpoint()), objstore.WithS3Options(srv.SetCredentials), objstore.WithClock(clock))
		if err != nil {
			t.Fatalf("open store %s: %v", s3b.spec, err)
		}
		return st
	}
	s3b.open = func(t *testing.T) agent.SessionStore { return s3b.openAt(t, time.Now) }
	return s3b
}

// dirBytes reads every file under dir.
func dirBytes(dir string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		var all []byte
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			all = append(all, b...)
			return err
		})
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		return all
	}
}

// bucketBytes reads every object of the bucket, and the decompressed
// bytes of the zstd ones (of a plaintext bucket: an encrypted one's are
// sealed).
func bucketBytes(srv *miniotest.Server, bucket string) func(t *testing.T) []byte {
	return bucketBytesBut(srv, bucket, nil)
}

// bucketBytesBut is bucketBytes without the objects skip names.
func bucketBytesBut(srv *miniotest.Server, bucket string, skip func(key string) bool) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		dec, _ := zstd.NewReader(nil)
		defer dec.Close()
		var all []byte
		for key, b := range srv.Objects(t, bucket) {
			if skip != nil && skip(key) {
				continue
			}
			all = append(all, b...)
			if strings.HasSuffix(key, ".zst") {
				raw, err := dec.DecodeAll(b, nil)
				switch {
				case err == nil:
					all = append(all, raw...)
				case !seal.IsSealed(b): // an encrypted bucket's are sealed
					t.Fatalf("decompress %s: %v", key, err)
				}
			}
		}
		return all
	}
}

func minioEnv(srv *miniotest.Server) []string { return srv.AWSEnv() }

func openStoreForTest(t *testing.T, spec, endpoint string) agent.SessionStore {
	t.Helper()
	st, err := backends.Open(context.Background(), spec, backends.Options{Endpoint: endpoint})
	if err != nil {
		t.Fatalf("open store %s: %v", spec, err)
	}
	return st
}

// result is what a run of the binary did.
type result struct {
	stdout, stderr string
	code           int
}

// processTimeout bounds each run of a binary under test.
const processTimeout = 2 * time.Minute

// pantoCmd prepares the binary with a clean environment: a private HOME
// and XDG directories, the given variables, nothing inherited that could
// point panto elsewhere.
func pantoCmd(t *testing.T, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	// Every wait on the process is bounded: past the deadline it is
	// killed, and Wait returns.
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, pantoBin, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = dir
	cmd.Env = append([]string{
		"HOME=" + home,
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"PATH=" + os.Getenv("PATH"),
		"TMPDIR=" + os.TempDir(),
	}, env...)
	// Watched for race reports; a caller that wants stderr too sets
	// cmd.Stderr = cmdtest.Stderr(t, "panto", w).
	cmd.Stderr = cmdtest.Stderr(t, "panto", nil)
	return cmd
}

// runPanto runs the binary with stdin and waits for it.
func runPanto(t *testing.T, dir string, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := pantoCmd(t, dir, env, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, cmdtest.Stderr(t, "panto", &errb)
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("panto %q did not finish; stderr: %s", args, errb.String())
	}
	return result{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
}

// providerCase is a provider style with its fake server.
type providerCase struct {
	style string
	key   string
	// keyVar is the style's own key variable.
	keyVar string
}

var providerCases = []providerCase{
	{fakeprovider.OpenAI, openaiKey, "OPENAI_API_KEY"},
	{fakeprovider.Anthropic, anthropicKey, "ANTHROPIC_API_KEY"},
}

// flags points panto at srv with the style's key in the environment.
func (pc providerCase) env(b backend) []string {
	return append([]string{pc.keyVar + "=" + pc.key, "PANTO_STORE=" + b.spec}, b.env...)
}

func (pc providerCase) flags(srv *fakeprovider.Server) []string {
	return []string{"--api-style", pc.style, "--base-url", srv.BaseURL(), "--model", "fake-model"}
}

// eachCase runs fn for every store backend and provider style.
func eachCase(t *testing.T, fn func(t *testing.T, b backend, pc providerCase)) {
	for _, kind := range backendKinds {
		for _, pc := range providerCases {
			t.Run(kind.name+"/"+pc.style, func(t *testing.T) {
				fn(t, kind.make(t), pc)
			})
		}
	}
}

// checkNoKey fails if a key appears in any stored byte.
func checkNoKey(t *testing.T, b backend, keys ...string) {
	t.Helper()
	data := b.bytes(t)
	if len(data) == 0 {
		t.Fatalf("%s store holds no bytes", b.name)
	}
	for _, k := range keys {
		if bytes.Contains(data, []byte(k)) {
			t.Errorf("the API key %q is in the %s store", k, b.name)
		}
	}
}

// loadOnly returns the conversation of the store's only session.
func loadOnly(t *testing.T, b backend) (agent.SessionInfo, *agent.Conversation) {
	t.Helper()
	st := b.open(t)
	ctx := context.Background()
	list, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d sessions in the store, want 1", len(list))
	}
	conv, err := st.Load(ctx, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return list[0], conv
}

func roles(msgs []agent.Message) string {
	var rs []string
	for _, m := range msgs {
		r := string(m.Role)
		if m.IsToolResult() {
			r = "tool"
		}
		if m.IsCompactionSummary() {
			r = "summary"
		}
		rs = append(rs, r)
	}
	return strings.Join(rs, ",")
}
