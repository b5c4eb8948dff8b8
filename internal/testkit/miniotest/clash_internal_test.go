package miniotest

import (
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestPortClash: the port picked for a server is answered by another
// server before ours binds it (two test binaries picked the same free
// port). The start must notice and move to another port, never hand the
// test the other server: one of another binary (its own credentials),
// and one that checks no credentials at all. Not parallel: it replaces
// pickPort.
func TestPortClash(t *testing.T) {
	other := NewOf(t, MinIO)
	noAuth := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer noAuth.Close()
	for _, tt := range []struct{ name, addr string }{
		{"another MinIO", other.Addr},
		{"a server without authentication", strings.TrimPrefix(noAuth.URL, "http://")},
	} {
		for _, k := range []*Kind{MinIO, VersityGW} {
			t.Run(tt.name+"/"+k.Name, func(t *testing.T) {
				_, portText, _ := net.SplitHostPort(tt.addr)
				taken, _ := strconv.Atoi(portText)
				orig := pickPort
				t.Cleanup(func() { pickPort = orig })
				picks := 0
				pickPort = func() (int, error) {
					picks++
					if picks == 1 {
						return taken, nil
					}
					return orig()
				}
				s := NewOf(t, k)
				if s.Addr == tt.addr {
					t.Fatalf("%s started on %s, where %s answers", k.Name, s.Addr, tt.name)
				}
				if ours, err := listens(s.Pid(), port(t, s.Addr)); err != nil || !ours {
					t.Fatalf("the server on %s is not the one started: %v", s.Addr, err)
				}
				// The bucket is made on the server the test got, not the other.
				bucket := s.NewBucket(t)
				if ok, err := other.Client(t).BucketExists(t.Context(), bucket); err != nil || ok {
					t.Fatalf("bucket %s on the other MinIO: %v %v", bucket, ok, err)
				}
			})
		}
	}
}

// TestRestartOnATakenPort: a killed server whose port another server took
// meanwhile does not restart onto it: Restart fails and says so.
func TestRestartOnATakenPort(t *testing.T) {
	s := NewOf(t, VersityGW)
	s.Kill()
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		t.Fatalf("the port was taken at once by something else: %v", err)
	}
	impostor := httptest.NewUnstartedServer(gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	impostor.Listener.Close()
	impostor.Listener = l
	impostor.Start()
	defer impostor.Close()
	err = s.Restart()
	if err == nil || !strings.Contains(err.Error(), "taken") {
		t.Fatalf("restart on a taken port: %v, want an error that says the port is taken", err)
	}
}

func port(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}
