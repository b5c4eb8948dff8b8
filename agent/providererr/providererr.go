// Package providererr turns what goes wrong between panto and a model
// provider into one line that says what to fix: the endpoint, what
// happened and what to do about it. It never includes request headers
// (where the API key travels) or the request URL's query.
package providererr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/panto-dev/panto/agent/stall"
)

// Error is a provider failure. Status is 0 when no HTTP response arrived.
type Error struct {
	// BaseURL is the endpoint, as configured (never with key material).
	BaseURL string
	// Status is the HTTP status, 0 when the provider was not reached or
	// the stream broke.
	Status int
	// Message is the provider's own explanation, when it gave one.
	Message string
	// Hint says what to do.
	Hint string
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "provider %s: ", e.BaseURL)
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "%d %s", e.Status, http.StatusText(e.Status))
		if e.Message != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(e.Message))
		}
	case e.Err != nil:
		b.WriteString(oneLine(e.Err.Error()))
	}
	if e.Hint != "" {
		b.WriteString(": ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// HTTP describes an HTTP error response. body is the response body (the
// provider's JSON error, if any); keyVars names the variables the key
// comes from, for the hint on 401 and 403.
func HTTP(baseURL string, status int, body string, keyVars string) *Error {
	e := &Error{BaseURL: baseURL, Status: status, Message: messageOf(body)}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Hint = "check the API key (" + keyVars + ")"
	case status == http.StatusNotFound:
		e.Hint = "check --base-url and --model"
	case status == http.StatusTooManyRequests:
		e.Hint = "rate limited or out of quota; wait and retry, or check your plan"
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		e.Hint = "the provider rejected the request; check --model and --reasoning"
	case status >= 500:
		e.Hint = "the provider failed; retry later"
	}
	return e
}

// Transport describes a failure to talk to the provider at all (refused
// connection, DNS, TLS, a broken stream). A cancelled ctx is returned as
// is, so callers can test it with errors.Is.
func Transport(baseURL string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// It was reached: the connection closed in the middle of the
		// response (a server restarted, a proxy's limit).
		return &Error{BaseURL: baseURL, Err: err, Hint: "the connection closed in the middle of the answer; retry"}
	}
	var stalled *stall.Error
	if errors.As(err, &stalled) {
		// The URL and the SDK's wording around it say nothing more.
		return &Error{BaseURL: baseURL, Err: stalled, Hint: "it accepted the request and went silent; retry (--provider-timeout sets how long to wait)"}
	}
	return &Error{BaseURL: baseURL, Err: err, Hint: "cannot reach the provider; check --base-url and your network"}
}

// Stream describes an error the provider reported inside a stream.
func Stream(baseURL string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &Error{BaseURL: baseURL, Err: err, Hint: "the response stream failed; retry"}
}

// messageOf extracts error.message (OpenAI and Anthropic shapes) or a
// top-level message from a JSON error body; else a short prefix of it.
func messageOf(body string) string {
	body = strings.TrimSpace(body)
	if body == "" {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal([]byte(body), &v) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		if len(v.Error) > 0 && json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
			return truncate(inner.Message)
		}
		var s string
		if len(v.Error) > 0 && json.Unmarshal(v.Error, &s) == nil && s != "" {
			return truncate(s)
		}
		if v.Message != "" {
			return truncate(v.Message)
		}
		return ""
	}
	if strings.HasPrefix(body, "<") { // an HTML error page says nothing useful
		return ""
	}
	return truncate(body)
}

func truncate(s string) string {
	const max = 200
	r := []rune(s)
	if len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
