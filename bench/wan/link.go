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
	upstream string
	delay    time.Duration // one way
	up, down *pipe
	wg       sync.WaitGroup
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
	k := &link{l: l, upstream: upstream, delay: rtt / 2, up: &pipe{rate: rate}, down: &pipe{rate: rate}}
	k.wg.Add(1)
	go k.serve()
	return k, nil
}

func (k *link) addr() string { return k.l.Addr().String() }

func (k *link) close() {
	k.l.Close()
	k.wg.Wait()
}

func (k *link) serve() {
	defer k.wg.Done()
	for {
		c, err := k.l.Accept()
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
