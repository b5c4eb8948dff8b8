package miniotest

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// A Kind is one S3 implementation the harness runs.
type Kind struct {
	// Name names the kind in subtests and messages.
	Name string
	// Version is the pinned release (a `go install` argument for a
	// server binary, a module version for one linked into the tests).
	Version string
	// Runs says how the harness runs it.
	Runs string
	// Supports is what the server does with the requests panto relies
	// on, as TestCapabilities measures it.
	Supports Capabilities
	// OptIn keeps the kind out of Matrix: a test runs on it by naming it
	// (Each, ConditionalKinds). The cluster is, because it doubles the
	// CPU time of the matrix tests on two cores.
	OptIn bool

	start   func(s *Server) error
	refusal string
}

// Capabilities are the behaviours of a server that panto's object store
// relies on, or that a user might expect, each as TestCapabilities
// measures it.
type Capabilities struct {
	// CreateIfAbsent: a PUT with If-None-Match: * of an existing key is
	// refused (412) and leaves the object alone; of a new key, it writes.
	CreateIfAbsent bool
	// RacingCreates: of concurrent If-None-Match: * PUTs of one new key,
	// exactly one succeeds and its body is what is stored.
	RacingCreates bool
	// ReplaceIfMatch: a PUT with If-Match naming a wrong ETag is refused
	// (412) and leaves the object alone; naming the current ETag, it
	// writes.
	ReplaceIfMatch bool
	// RacingReplaces: of concurrent If-Match PUTs naming one ETag,
	// exactly one succeeds.
	RacingReplaces bool
	// GetIfNoneMatch: a GET with If-None-Match naming the current ETag
	// answers 304 Not Modified.
	GetIfNoneMatch bool
	// Multipart: a multipart upload completes and reads back whole.
	Multipart bool
	// ListPrefix: ListObjectsV2 with a prefix lists exactly the keys
	// under it, and with the delimiter / one level of them: the keys and
	// the common prefixes (as the object store's repair lists).
	ListPrefix bool
}

// Conditional reports whether the server honours the conditional writes
// every append and checkpoint relies on; a store must refuse it at Open
// otherwise.
func (c Capabilities) Conditional() bool {
	return c.CreateIfAbsent && c.RacingCreates && c.ReplaceIfMatch && c.RacingReplaces
}

// MinIOVersion is the pinned MinIO release the Makefile installs.
const MinIOVersion = "github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"

// VersityGWVersion is the pinned versitygw release the Makefile installs.
const VersityGWVersion = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

var allConditional = Capabilities{
	CreateIfAbsent: true, RacingCreates: true, ReplaceIfMatch: true, RacingReplaces: true,
	GetIfNoneMatch: true, Multipart: true, ListPrefix: true,
}

// gofakes3Supports: everything but multipart, whose parts sent with a
// streaming signature (aws-chunked, as minio-go sends them over HTTP)
// are stored with their chunk framing. panto makes no multipart upload.
var gofakes3Supports = Capabilities{
	CreateIfAbsent: true, RacingCreates: true, ReplaceIfMatch: true, RacingReplaces: true,
	GetIfNoneMatch: true, Multipart: false, ListPrefix: true,
}

// MinIO is a MinIO server process on a data directory.
var MinIO = &Kind{
	Name:     "minio",
	Version:  MinIOVersion,
	Runs:     "process (`minio server`), data directory",
	Supports: allConditional,
	start: func(s *Server) error {
		bin, err := binary("minio", "PANTO_MINIO", "go install "+MinIOVersion)
		if err != nil {
			return err
		}
		return startProcess(s, bin, func(s *Server, bin, dir string) (*exec.Cmd, error) {
			console, err := pickPort()
			if err != nil {
				return nil, err
			}
			cmd := exec.Command(bin, "server", "--quiet", "--address", s.Addr,
				"--console-address", fmt.Sprintf("127.0.0.1:%d", console), filepath.Join(dir, "data"))
			cmd.Env = append(serverEnv(dir),
				"MINIO_ROOT_USER="+s.accessKey,
				"MINIO_ROOT_PASSWORD="+s.secretKey,
				"MINIO_BROWSER=off",
				"MINIO_UPDATE=off",
				"MINIO_REGION="+Region,
			)
			return cmd, nil
		})
	},
}

// VersityGW is a versitygw gateway process over a POSIX directory, its
// metadata in a sidecar directory; a bucket is a directory.
var VersityGW = &Kind{
	Name:     "versitygw",
	Version:  VersityGWVersion,
	Runs:     "process (`versitygw posix --sidecar`), data directory",
	Supports: allConditional,
	start: func(s *Server) error {
		bin, err := binary("versitygw", "PANTO_VERSITYGW", "go install "+VersityGWVersion)
		if err != nil {
			return err
		}
		return startProcess(s, bin, func(s *Server, bin, dir string) (*exec.Cmd, error) {
			meta, data := filepath.Join(dir, "meta"), filepath.Join(dir, "data")
			for _, d := range []string{meta, data} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return nil, err
				}
			}
			cmd := exec.Command(bin, "--quiet", "--port", s.Addr, "--region", Region, "posix", "--sidecar", meta, data)
			cmd.Env = append(serverEnv(dir),
				"ROOT_ACCESS_KEY="+s.accessKey,
				"ROOT_SECRET_KEY="+s.secretKey,
			)
			return cmd, nil
		})
	},
}

// GoFakeS3 is gofakes3 on its in-memory backend, served by an httptest
// server in the test process. It checks no signature: any credentials
// are accepted.
var GoFakeS3 = &Kind{
	Name:     "gofakes3",
	Version:  "github.com/johannesboyne/gofakes3 v1.2.0",
	Runs:     "in the test process (httptest, in-memory backend), no authentication",
	Supports: gofakes3Supports,
	start: func(s *Server) error {
		faker := gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog()))
		srv := httptest.NewServer(faker.Server())
		s.Addr = strings.TrimPrefix(srv.URL, "http://")
		s.stop = srv.Close
		return nil
	},
}

// serverEnv is the environment of a server process in dir: PATH, and
// HOME and TMPDIR in its directory, nothing of the test's own.
func serverEnv(dir string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
}

// laxKind is a LaxProxy of mode in front of the shared MinIO; Refusal is
// what a store's refusal of it must name.
func laxKind(mode, refusal string, supports Capabilities) *Kind {
	return &Kind{
		Name:     "lax-" + mode,
		Version:  "LaxProxy(" + mode + ") in front of " + MinIO.Name,
		Runs:     "in the test process (a reverse proxy in front of the shared MinIO)",
		Supports: supports,
		start: func(s *Server) error {
			up, err := sharedOf(MinIO)
			if err != nil {
				return err
			}
			h, _ := laxHandler(up, mode)
			srv := httptest.NewServer(h)
			s.Addr = strings.TrimPrefix(srv.URL, "http://")
			s.accessKey, s.secretKey = up.accessKey, up.secretKey
			s.stop = srv.Close
			return nil
		},
		refusal: refusal,
	}
}

// The lax servers: MinIO behind a proxy that mishandles conditional
// writes as S3-compatible servers have been seen to.
var (
	LaxDropConditions   = laxKind(DropConditions, "If-Match", Capabilities{GetIfNoneMatch: true, Multipart: true, ListPrefix: true})
	LaxDropIfMatch      = laxKind(DropIfMatch, "If-Match", Capabilities{CreateIfAbsent: true, RacingCreates: true, GetIfNoneMatch: true, Multipart: true, ListPrefix: true})
	LaxDropIfNoneMatch  = laxKind(DropIfNoneMatch, "If-None-Match", Capabilities{ReplaceIfMatch: true, RacingReplaces: true, GetIfNoneMatch: true, Multipart: true, ListPrefix: true})
	LaxRefuseConditions = laxKind(RefuseConditions, "NotImplemented", Capabilities{GetIfNoneMatch: true, Multipart: true, ListPrefix: true})
)

// Kinds is every kind of server, in the order of the README's table.
var Kinds = []*Kind{MinIO, MinIOCluster, VersityGW, GoFakeS3, LaxDropConditions, LaxDropIfMatch, LaxDropIfNoneMatch, LaxRefuseConditions}

// Refusal is the word a store's refusal of a server of this kind names
// (the behaviour it lacks), or "" for a server a store must accept.
func (k *Kind) Refusal() string { return k.refusal }

// ConditionalKinds are the kinds that honour conditional writes, the
// opt-in ones included; LaxKinds those a store must refuse at Open.
func ConditionalKinds() []*Kind {
	return kindsWhere(func(k *Kind) bool { return k.Supports.Conditional() })
}

// LaxKinds: see ConditionalKinds.
func LaxKinds() []*Kind { return kindsWhere(func(k *Kind) bool { return !k.Supports.Conditional() }) }

// MatrixKinds are the kinds Matrix runs on: those that honour conditional
// writes and are not opt-in.
func MatrixKinds() []*Kind {
	return kindsWhere(func(k *Kind) bool { return k.Supports.Conditional() && !k.OptIn })
}

func kindsWhere(keep func(*Kind) bool) []*Kind {
	var out []*Kind
	for _, k := range Kinds {
		if keep(k) {
			out = append(out, k)
		}
	}
	return out
}

// Matrix runs fn as a parallel subtest, named after the kind, on the
// shared server of each kind in MatrixKinds. fn must not use t.Setenv.
func Matrix(t *testing.T, fn func(t *testing.T, s *Server)) { Each(t, MatrixKinds(), fn) }

// Lax runs fn as a parallel subtest on the shared server of each kind a
// store must refuse.
func Lax(t *testing.T, fn func(t *testing.T, s *Server)) { Each(t, LaxKinds(), fn) }

// Each runs fn as a parallel subtest on the shared server of each kind.
func Each(t *testing.T, kinds []*Kind, fn func(t *testing.T, s *Server)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, SharedOf(t, k))
		})
	}
}
