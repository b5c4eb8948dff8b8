package miniotest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/minio/minio-go/v7"
)

// ClusterNodes is the size of the MinIOCluster kind: the smallest
// distributed MinIO whose default erasure parity (EC:2 on a set of 4
// drives) keeps reading and writing with one node down.
const ClusterNodes = 4

// MinIOCluster is a distributed, erasure-coded MinIO of ClusterNodes
// nodes, each its own process, port and data directory on loopback,
// reached through a round-robin proxy in the test process (see Cluster).
var MinIOCluster = &Kind{
	Name:     "minio-cluster",
	Version:  MinIOVersion,
	Runs:     fmt.Sprintf("%d processes (`minio server` of the same %d endpoints), a data directory each, behind a round-robin proxy", ClusterNodes, ClusterNodes),
	Supports: allConditional,
	OptIn:    true,
	start:    func(s *Server) error { _, err := startCluster(s, ClusterNodes); return err },
}

// Cluster is a distributed MinIO: nodes MinIO processes, each on its own
// loopback port and data directory, started with the same list of
// endpoints (one drive each, one erasure set), in front of which a proxy
// sends each request to the next node in turn, as a load balancer in
// front of a real cluster does. So a write made through one node is read
// through another, and racing conditional writes meet in MinIO's
// distributed locks, not in one process.
//
// The embedded Server is the proxy: its Endpoint, credentials, Client
// and NewBucket reach the whole cluster. The proxy passes a request on
// to the next node when a node refuses the connection (it is down, and
// nothing was sent), as nginx does by default (proxy_next_upstream
// error); a request a node dies in the middle of fails (502), and the
// client retries it, as it would against a real cluster.
type Cluster struct {
	*Server
	nodes []*Server
	proxy *httptest.Server
}

// NewCluster starts a cluster of nodes nodes of the test's own, stopped
// when the test ends: for a test that kills or restarts nodes. A test
// that does neither shares the binary's: SharedOf(t, MinIOCluster).
func NewCluster(t testing.TB, nodes int) *Cluster {
	t.Helper()
	if _, err := active(); err != nil {
		t.Fatal(err)
	}
	s := newServer(MinIOCluster)
	c, err := startCluster(s, nodes)
	if err != nil {
		t.Fatalf("start %s of %d nodes: %v", MinIOCluster.Name, nodes, err)
	}
	t.Cleanup(s.Stop)
	return c
}

// Nodes is the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Settled says what the nodes did before they agreed, as the cluster
// started (see settle).
func (c *Cluster) Settled() string { return c.settled }

// Node is node i reached directly, not through the proxy.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// KillNode stops node i abruptly (SIGKILL to its process group), keeping
// its data, as a crashed machine looks to the rest of the cluster.
func (c *Cluster) KillNode(i int) { c.nodes[i].proc.kill() }

// RestartNode starts a killed node again on its address and data, and
// waits until it sees every drive of the cluster online. Even then, for
// a moment (about a second, seen in two runs of three), the node may
// answer NoSuchKey for an object written while it was down, as MinIO
// issue 10583 describes behind a load balancer: a test that restarts a
// node waits until the node serves what it missed (see
// TestClusterLosesANode).
func (c *Cluster) RestartNode(i int) error {
	n := c.nodes[i]
	if err := n.proc.launch(n); err != nil {
		return fmt.Errorf("restart node %d on %s: %w", i, n.Addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		err := seesEveryDrive(ctx, n, len(c.nodes))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("restart node %d on %s: %w", i, n.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seesEveryDrive returns nil when node n, asked through MinIO's admin API,
// reports drives drives, each online.
func seesEveryDrive(ctx context.Context, n *Server, drives int) error {
	adm, err := madmin.New(n.Addr, n.accessKey, n.secretKey, false)
	if err != nil {
		return err
	}
	info, err := adm.StorageInfo(ctx)
	if err != nil {
		return err
	}
	online := 0
	for _, d := range info.Disks {
		if d.State == madmin.DriveStateOk {
			online++
		}
	}
	if online != drives {
		return fmt.Errorf("%d of %d drives online", online, drives)
	}
	return nil
}

// Healthy returns nil when MinIO's cluster health check, asked of a node
// that runs, answers 200: the cluster has the quorum to read and write.
func (c *Cluster) Healthy(ctx context.Context) error {
	var errs []error
	for i, n := range c.nodes {
		if n.Pid() == 0 {
			continue
		}
		err := clusterHealthy(ctx, n.Addr)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", i, err))
	}
	if len(errs) == 0 {
		return errors.New("no node of the cluster runs")
	}
	return errors.Join(errs...)
}

// clusterHealthy asks the node on addr for MinIO's cluster health check
// (unauthenticated: 200 when the cluster has write quorum).
func clusterHealthy(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/minio/health/cluster", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster health: %s", resp.Status)
	}
	return nil
}

// startCluster starts the nodes of s, a cluster of n, all at once (a
// node answers only once the cluster has formed), then the proxy in
// front of them, which becomes s's address.
func startCluster(s *Server, n int) (*Cluster, error) {
	if n < 2 {
		return nil, fmt.Errorf("a cluster needs at least 2 nodes, not %d", n)
	}
	bin, err := binary("minio", "PANTO_MINIO", "go install "+MinIOVersion)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Server: s}
	for i := range n {
		dir, err := os.MkdirTemp("", fmt.Sprintf("panto-%s-node%d-", s.Kind.Name, i))
		if err != nil {
			c.removeDirs()
			return nil, fmt.Errorf("data dir: %w", err)
		}
		c.nodes = append(c.nodes, &Server{Kind: s.Kind, accessKey: s.accessKey, secretKey: s.secretKey,
			proc: &process{dir: dir, bin: bin}})
	}
	for attempt := 1; ; attempt++ {
		err := c.launch()
		if err == nil {
			break
		}
		c.killNodes()
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			c.removeDirs()
			return nil, err
		}
		for _, node := range c.nodes { // a fresh cluster on the next ports
			os.RemoveAll(filepath.Join(node.proc.dir, "data"))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		err := c.ready(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			c.stop()
			return nil, fmt.Errorf("%s: not healthy within %s: %w", s.Kind.Name, startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	settled, err := c.settle(ctx)
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: %w", s.Kind.Name, err)
	}
	s.settled = settled
	s.nodes = c.nodes
	c.proxy = httptest.NewServer(c.proxyHandler())
	s.Addr = strings.TrimPrefix(c.proxy.URL, "http://")
	s.stop = c.stop
	return c, nil
}

// ready returns nil when the cluster is healthy and every node sees
// every drive online.
func (c *Cluster) ready(ctx context.Context) error {
	if err := c.Healthy(ctx); err != nil {
		return err
	}
	for i, n := range c.nodes {
		if err := seesEveryDrive(ctx, n, len(c.nodes)); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
	}
	return nil
}

// settle's bar: settleStreak rounds in a row, over at least settleQuiet,
// must find every node serving what another node just acknowledged.
const (
	settleStreak = 4 * ClusterNodes
	settleQuiet  = 5 * time.Second
)

// settle returns once the nodes agree: for settleStreak rounds in a row,
// an object created through one node, then one replaced through it,
// read back whole and current from every node, for at least settleQuiet.
// It says what it saw.
//
// Right after a cluster forms, with every node healthy and seeing every
// drive online, a node has answered NoSuchKey for an object another had
// just acknowledged (CI, stops 33, 47 and 48: once in each run, in the
// first cluster tests, on a machine loaded by the suite). Settle has seen
// why: for the first 10 to 15 seconds, one node's writes may wait 4
// seconds and fail for want of write quorum (503 SlowDown), though every
// node reports every drive online. MinIO issue 10583 describes the same
// after a restart. The tests are of panto's protocol on a formed
// cluster, not of MinIO's start, so they begin when the nodes agree; a
// disagreement after that still fails them.
func (c *Cluster) settle(ctx context.Context) (string, error) {
	start := time.Now()
	clients := make([]*minio.Client, len(c.nodes))
	for i, n := range c.nodes {
		mc, err := n.client()
		if err != nil {
			return "", err
		}
		clients[i] = mc
	}
	made := false
	var seen []string
	streak, rounds, quietSince := 0, 0, time.Now()
	for ; streak < settleStreak || time.Since(quietSince) < settleQuiet; rounds++ {
		if ctx.Err() != nil {
			return "", fmt.Errorf("nodes disagree after %s (%d rounds): %s", time.Since(start).Round(time.Millisecond), rounds, strings.Join(seen, "; "))
		}
		err := settleRound(ctx, clients, rounds, !made)
		if err == nil {
			made = true
			streak++
			continue
		}
		streak, quietSince = 0, time.Now()
		if len(seen) < 5 {
			seen = append(seen, fmt.Sprintf("round %d through node %d, at %s: %v", rounds, rounds%len(clients), time.Since(start).Round(time.Millisecond), err))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range rounds {
		clients[0].RemoveObject(ctx, settleBucket, fmt.Sprintf("fresh-%d", i), minio.RemoveObjectOptions{})
	}
	clients[0].RemoveObject(ctx, settleBucket, "replaced", minio.RemoveObjectOptions{})
	clients[0].RemoveBucket(ctx, settleBucket)
	if len(seen) == 0 {
		return fmt.Sprintf("the nodes agreed from the start (%d rounds in %s)", rounds, time.Since(start).Round(time.Millisecond)), nil
	}
	return fmt.Sprintf("the nodes agreed after %s (%d rounds); before that: %s", time.Since(start).Round(time.Millisecond), rounds, strings.Join(seen, "; ")), nil
}

const settleBucket = "panto-settle"

// settleRound is settle's round: through node round (modulo the nodes),
// it makes the bucket first when makeBucket is set (a write that may be
// refused at first like any), creates the object fresh-<round> and
// replaces the object "replaced", then reads both back from every node.
func settleRound(ctx context.Context, clients []*minio.Client, round int, makeBucket bool) error {
	writer := clients[round%len(clients)]
	if makeBucket {
		err := writer.MakeBucket(ctx, settleBucket, minio.MakeBucketOptions{Region: Region})
		if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
			return fmt.Errorf("make bucket: %w", err)
		}
	}
	fresh, body := fmt.Sprintf("fresh-%d", round), fmt.Sprintf("round %d", round)
	for _, key := range []string{fresh, "replaced"} {
		if err := putString(ctx, writer, settleBucket, key, body); err != nil {
			return err
		}
	}
	for i, mc := range clients {
		for _, key := range []string{fresh, "replaced"} {
			if err := holdsString(ctx, mc, settleBucket, key, body); err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
		}
	}
	return nil
}

func putString(ctx context.Context, mc *minio.Client, bucket, key, body string) error {
	_, err := mc.PutObject(ctx, bucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func holdsString(ctx context.Context, mc *minio.Client, bucket, key, want string) error {
	o, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	defer o.Close()
	got, err := io.ReadAll(o)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if string(got) != want {
		return fmt.Errorf("get %s: %q, want %q", key, got, want)
	}
	return nil
}

// launch picks a port for each node and starts them all, each with the
// list of every node's endpoint, and waits until each answers.
func (c *Cluster) launch() error {
	ports := map[int]bool{}
	var endpoints []string
	for _, node := range c.nodes {
		port, err := pickPort()
		for err == nil && ports[port] {
			port, err = pickPort()
		}
		if err != nil {
			return err
		}
		ports[port] = true
		node.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		endpoints = append(endpoints, "http://"+node.Addr+filepath.Join(node.proc.dir, "data"))
	}
	for _, node := range c.nodes {
		node.proc.command = nodeCommand(endpoints)
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, node := range c.nodes {
		wg.Go(func() {
			if err := node.proc.launch(node); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodeCommand runs one node of the cluster of endpoints, on s.Addr.
// MINIO_CI_CD lets drives share the root disk; _MINIO_SERVER_LOCAL tells
// a node in a container (where MinIO will not trust that a loopback
// address is its own) which endpoint is its own.
func nodeCommand(endpoints []string) func(s *Server, bin, dir string) (*exec.Cmd, error) {
	return func(s *Server, bin, dir string) (*exec.Cmd, error) {
		console, err := pickPort()
		if err != nil {
			return nil, err
		}
		args := append([]string{"server", "--quiet", "--address", s.Addr,
			"--console-address", fmt.Sprintf("127.0.0.1:%d", console)}, endpoints...)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(serverEnv(dir),
			"MINIO_ROOT_USER="+s.accessKey,
			"MINIO_ROOT_PASSWORD="+s.secretKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
			"MINIO_REGION="+Region,
			"MINIO_CI_CD=1",
			"_MINIO_SERVER_LOCAL="+s.Addr,
		)
		return cmd, nil
	}
}

// proxyHandler is the round-robin proxy. It keeps the Host header the
// client signed.
func (c *Cluster) proxyHandler() http.Handler {
	rr := &roundRobin{transport: http.DefaultTransport.(*http.Transport).Clone()}
	for _, n := range c.nodes {
		rr.nodes = append(rr.nodes, n.Addr)
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", rr.nodes[0] // roundRobin picks the node
			r.Out.Host = r.In.Host
		},
		Transport: rr,
		// A request to a node killed under it is the test's doing;
		// the client sees the 502.
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

// roundRobin sends each request to the next node, passing it on to the
// one after when a node refuses the connection.
type roundRobin struct {
	nodes     []string
	next      atomic.Uint64
	transport *http.Transport
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the request body: %w", err)
		}
	}
	first := rr.next.Add(1)
	var refused []error
	for k := range uint64(len(rr.nodes)) {
		out := r.Clone(r.Context())
		out.URL.Host = rr.nodes[(first+k)%uint64(len(rr.nodes))]
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.Body, _ = out.GetBody()
		if body == nil {
			out.Body, out.GetBody = nil, nil
		}
		resp, err := rr.transport.RoundTrip(out)
		if err == nil {
			return resp, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		refused = append(refused, err)
	}
	return nil, errors.Join(refused...)
}

// killNodes kills every node's process.
func (c *Cluster) killNodes() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.proc.kill)
	}
	wg.Wait()
}

func (c *Cluster) removeDirs() {
	for _, n := range c.nodes {
		os.RemoveAll(n.proc.dir)
	}
}

// stop kills the nodes, closes the proxy and removes the data.
func (c *Cluster) stop() {
	c.killNodes()
	if c.proxy != nil {
		c.proxy.Close()
	}
	c.removeDirs()
}
