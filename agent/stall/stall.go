// Package stall bounds how long an exchange with a model provider may go
// without a byte: a server that accepts the request and then sends
// nothing (a local server wedged, a proxy that holds the connection
// open) would otherwise keep a step, and a one-shot panto in a script,
// waiting for ever, with no error to say why.
//
// The limit is on silence, not on the whole answer: a long answer that
// streams, or a provider's keep-alive events (Anthropic's pings), keeps
// the exchange going however long it takes. It covers the wait for the
// response's headers and each wait for the next bytes of its body.
package stall

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// Error is the failure of an exchange that went silent for After.
type Error struct{ After time.Duration }

func (e *Error) Error() string {
	return fmt.Sprintf("no byte received for %s", e.After)
}

// Timeout reports true, as a net timeout does.
func (e *Error) Timeout() bool { return true }

// Client returns an HTTP client whose exchanges fail with *Error after
// idle without a byte of the response. idle <= 0 returns a client
// without the limit.
func Client(idle time.Duration) *http.Client {
	base := http.DefaultTransport
	if idle <= 0 {
		return &http.Client{Transport: base}
	}
	return &http.Client{Transport: &transport{base: base, idle: idle}}
}

type transport struct {
	base http.RoundTripper
	idle time.Duration
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	w := &watch{idle: t.idle, cancel: cancel}
	w.timer = time.AfterFunc(t.idle, w.fire)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		w.stop()
		if w.fired.Load() {
			return nil, &Error{After: t.idle}
		}
		return nil, err
	}
	w.timer.Reset(t.idle)
	resp.Body = &body{ReadCloser: resp.Body, w: w}
	return resp, nil
}

// watch cancels an exchange's context once idle passes without a byte.
type watch struct {
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func (w *watch) fire() {
	w.fired.Store(true)
	w.cancel()
}

func (w *watch) stop() {
	w.timer.Stop()
	w.cancel()
}

type body struct {
	io.ReadCloser
	w *watch
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.w.fired.Load() {
		b.w.timer.Reset(b.w.idle)
	}
	if err != nil && err != io.EOF && b.w.fired.Load() {
		return n, &Error{After: b.w.idle}
	}
	return n, err
}

func (b *body) Close() error {
	b.w.stop()
	return b.ReadCloser.Close()
}
