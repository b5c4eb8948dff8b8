// Package faultnet puts a real TCP proxy with faults between a test's
// client and its server: connection resets, stalls, latency and a rate
// limit, on loopback only. It is toxiproxy (github.com/Shopify/toxiproxy)
// run in process, so that a test needs no extra server, and the faults
// are toxiproxy's "toxics", each on the data going down (server to
// client), up, or both.
//
// The fault tests turn resets and stalls on and off while a store or
// panto-sync works through it. (The WAN benchmark, bench/wan, has a proxy
// of its own: toxiproxy's rate limit applies to each connection alone.)
package faultnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy forwards a listener on loopback to an upstream address, with the
// faults it is given.
type Proxy struct {
	p *toxiproxy.Proxy
	// Addr is the proxy's host:port.
	Addr string
	n    int
}

// New starts a proxy to upstream (host:port, or a URL whose host is
// taken), stopped when the test ends.
func New(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p, err := Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Start starts a proxy to upstream; Stop stops it.
func Start(upstream string) (*Proxy, error) {
	host := upstream
	if u, err := url.Parse(upstream); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err != nil || !isLoopback(h) {
		return nil, fmt.Errorf("faultnet: upstream %q: only loopback addresses may be proxied", upstream)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "faultnet", "127.0.0.1:0", host)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("faultnet: start a proxy to %s: %w", host, err)
	}
	return &Proxy{p: p, Addr: p.Listen}, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the proxy's address as an http:// URL.
func (p *Proxy) URL() string { return "http://" + p.Addr }

// Stop closes the proxy and its connections.
func (p *Proxy) Stop() { p.p.Stop() }

// Fault is one toxic: a toxiproxy type and its attributes.
type Fault struct {
	// Type is a toxiproxy toxic: "latency" (latency, jitter in ms),
	// "bandwidth" (rate in KB/s), "reset_peer" (timeout in ms), "timeout"
	// (timeout in ms), "slicer", "limit_data" (bytes).
	Type       string
	Attributes map[string]int64
	// Stream is "downstream" (server to client, the default) or
	// "upstream".
	Stream string
	// Toxicity is the share of connections it applies to, 0 to 1 (0
	// means 1).
	Toxicity float32
}

// Add applies a fault to the connections made from now on (and to the
// open ones for the stream toxics), and returns its name.
func (p *Proxy) Add(f Fault) (string, error) {
	p.n++
	name := fmt.Sprintf("%s-%d", f.Type, p.n)
	if f.Stream == "" {
		f.Stream = "downstream"
	}
	if f.Toxicity == 0 {
		f.Toxicity = 1
	}
	body, err := json.Marshal(map[string]any{"name": name, "type": f.Type, "stream": f.Stream, "toxicity": f.Toxicity, "attributes": f.Attributes})
	if err != nil {
		return "", err
	}
	if _, err := p.p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return "", fmt.Errorf("faultnet: add %s: %w", f.Type, err)
	}
	return name, nil
}

// Remove removes the fault of that name.
func (p *Proxy) Remove(name string) error {
	return p.p.Toxics.RemoveToxic(context.Background(), name)
}

// Clear removes every fault.
func (p *Proxy) Clear() { p.p.Toxics.ResetToxics(context.Background()) }
