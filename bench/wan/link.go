package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// A link is a simulated network path to one server: every connection
// through it shares its rate in each direction, as the connections of a
// real access link do (toxiproxy limits each connection on its own, so a
// tool opening 16 connections would get 16 times the rate), and each
// byte arrives half a round trip after it was sent.
type link struct {
	l        net.Listener
	address  string
	upstream string
	delay    time.Duration // one way
	up, down *pipe
	wg       sync.WaitGroup

	// mu guards what a fault changes: frozen holds every byte until thaw
	// (a server that accepts and never answers); down closes the listener
	// and every connection (refused, as a dead server).
	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
	conns  map[net.Conn]bool
	isDown bool
}

// pipe is one direction's shared rate: a byte may leave no sooner than
// the bytes before it, from any connection, have left at the rate.
type pipe struct {
	mu   sync.Mutex
	rate float64 // bytes per second; 0: unlimited
	next time.Time
}

// wait blocks until n bytes may leave.
func (p *pipe) wait(n int) {
	if p.rate == 0 {
		return
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	until := p.next
	p.mu.Unlock()
	time.Sleep(time.Until(until))
}

// startLink listens on loopback and forwards to upstream with a round
// trip rtt and rate bytes per second each way (0: unlimited).
func startLink(upstream string, rtt time.Duration, rate float64) (*link, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k := &link{l: l, address: l.Addr().String(), upstream: upstream, delay: rtt / 2, up: &pipe{rate: rate}, down: &pipe{rate: rate}, conns: map[net.Conn]bool{}}
	k.thawed = sync.NewCond(&k.mu)
	k.wg.Add(1)
	go k.serve(l)
	return k, nil
}

// freeze holds every byte in both directions, of the connections open
// and of new ones, until thaw.
func (k *link) freeze() {
	k.mu.Lock()
	k.frozen = true
	k.mu.Unlock()
}

func (k *link) thaw() {
	k.mu.Lock()
	k.frozen = false
	k.thawed.Broadcast()
	k.mu.Unlock()
}

// gate waits while the link is frozen.
func (k *link) gate() {
	k.mu.Lock()
	for k.frozen {
		k.thawed.Wait()
	}
	k.mu.Unlock()
}

// kill closes the listener and every connection: connections are then
// refused, as by a dead server, until revive listens on the same address.
func (k *link) kill() {
	k.mu.Lock()
	k.isDown = true
	k.l.Close()
	for c := range k.conns {
		c.Close()
	}
	k.mu.Unlock()
	k.wg.Wait()
}

func (k *link) revive() error {
	l, err := net.Listen("tcp", k.addr())
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.l, k.isDown = l, false
	k.mu.Unlock()
	k.wg.Add(1)
	go k.serve(l)
	return nil
}

// track records c for kill; it reports false (and closes c) when the link
// is down.
func (k *link) track(c net.Conn, open bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !open {
		delete(k.conns, c)
		return true
	}
	if k.isDown {
		c.Close()
		return false
	}
	k.conns[c] = true
	return true
}

func (k *link) addr() string { return k.address }

func (k *link) close() {
	k.thaw()
	k.mu.Lock()
	k.l.Close()
	k.mu.Unlock()
	k.wg.Wait()
}

func (k *link) serve(l net.Listener) {
	defer k.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go k.forward(c)
	}
}

func (k *link) forward(client net.Conn) {
	server, err := net.Dial("tcp", k.upstream)
	if err != nil {
		client.Close()
		return
	}
	if !k.track(client, true) || !k.track(server, true) {
		client.Close()
		server.Close()
		return
	}
	defer k.track(client, false)
	defer k.track(server, false)
	done := make(chan struct{}, 2)
	go func() { k.carry(server, client, k.up); done <- struct{}{} }()
	go func() { k.carry(client, server, k.down); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	<-done
}

// chunk is data read at a time, delivered delay after it.
type chunk struct {
	data []byte
	at   time.Time
	err  error
}

// carry copies src to dst, each chunk delay after it was read and no
// faster than the pipe's rate. Reading goes on while earlier chunks wait,
// so the delay is latency, not a stop-and-wait.
func (k *link) carry(dst, src net.Conn, p *pipe) {
	q := make(chan chunk, 1024)
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{data: buf[:n], at: time.Now()}
			}
			if err != nil {
				q <- chunk{err: err, at: time.Now()}
				close(q)
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at.Add(k.delay)))
		k.gate()
		if c.err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(c.err, io.EOF) {
				tc.CloseWrite()
				continue
			}
			dst.Close()
			continue
		}
		p.wait(len(c.data))
		if _, err := dst.Write(c.data); err != nil {
			src.Close()
			for range q {
			}
			return
		}
	}
}
