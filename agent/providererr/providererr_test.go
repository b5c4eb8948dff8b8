package providererr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestHTTP(t *testing.T) {
	tests := []struct {
		status int
		body   string
		want   string
	}{
		{401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`, "provider http://p/v1: 401 Unauthorized (Incorrect API key provided): check the API key (PANTO_API_KEY / X_KEY)"},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "provider http://p/v1: 429 Too Many Requests (slow down): rate limited or out of quota; wait and retry, or check your plan"},
		{500, "<html>\n<body>oops</body></html>", "provider http://p/v1: 500 Internal Server Error: the provider failed; retry later"},
		{404, `{"message":"model not found"}`, "provider http://p/v1: 404 Not Found (model not found): check --base-url and --model"},
		{503, "upstream\nconnect error", "provider http://p/v1: 503 Service Unavailable (upstream connect error): the provider failed; retry later"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			if got := HTTP("http://p/v1", tt.status, tt.body, "PANTO_API_KEY / X_KEY").Error(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestTransportKeepsCancellation(t *testing.T) {
	if err := Transport("u", fmt.Errorf("post: %w", context.Canceled)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
	err := Transport("http://p", errors.New("dial tcp: connection refused\nmore"))
	var pe *Error
	if !errors.As(err, &pe) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "cannot reach the provider") {
		t.Errorf("transport: %v", err)
	}
	// A stream cut short reached the provider: the hint says so.
	err = Transport("http://p", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF))
	if !strings.Contains(err.Error(), "the connection closed in the middle of the answer; retry") || strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("broken stream: %v", err)
	}
}
