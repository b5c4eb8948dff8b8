package miniotest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Lax modes: what a LaxProxy does to the conditional headers of a PUT, as
// S3-compatible servers have been seen to.
const (
	// DropConditions ignores If-None-Match and If-Match.
	DropConditions = "drop"
	// DropIfMatch ignores If-Match only.
	DropIfMatch = "drop-if-match"
	// DropIfNoneMatch ignores If-None-Match only.
	DropIfNoneMatch = "drop-if-none-match"
	// RefuseConditions answers 501 NotImplemented to either.
	RefuseConditions = "501"
)

// LaxProxy is a server in front of s that behaves like an S3 server with
// weaker conditional writes than S3's (mode: DropConditions, DropIfMatch,
// DropIfNoneMatch, RefuseConditions), stopped when the test ends. It
// returns the proxy's endpoint and a count of the conditional PUTs it saw.
// The lax kinds (LaxKinds) are these proxies in front of the shared MinIO.
func LaxProxy(t testing.TB, s *Server, mode string) (string, *atomic.Int64) {
	t.Helper()
	h, conditional := laxHandler(s, mode)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, conditional
}

// laxHandler is the proxy of LaxProxy. A dropped header was signed by the
// client, so the proxy signs the request again, as the server's own front
// end would have checked it and then ignored the header.
func laxHandler(s *Server, mode string) (http.Handler, *atomic.Int64) {
	target, err := url.Parse(s.Endpoint())
	if err != nil {
		panic(err) // an Endpoint is always a URL
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: s.accessKey, SecretAccessKey: s.secretKey}
	var conditional atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.Header.Get("If-None-Match") == "" && r.Header.Get("If-Match") == "" {
			proxy.ServeHTTP(w, r) // the Host header stays the proxy's, which is what was signed
			return
		}
		conditional.Add(1)
		switch mode {
		case RefuseConditions:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotImplemented)
			w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>`))
			return
		case DropConditions:
			r.Header.Del("If-None-Match")
			r.Header.Del("If-Match")
		case DropIfMatch:
			r.Header.Del("If-Match")
		case DropIfNoneMatch:
			r.Header.Del("If-None-Match")
		}
		// Sign again what is forwarded (the payload hash as the client
		// gave it), for the upstream's host.
		r.Header.Del("Authorization")
		r.Host = target.Host
		r.URL.Scheme, r.URL.Host = target.Scheme, target.Host
		payload := r.Header.Get("X-Amz-Content-Sha256")
		if err := signer.SignHTTP(context.Background(), creds, r, payload, "s3", Region, time.Now().UTC()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}), &conditional
}
