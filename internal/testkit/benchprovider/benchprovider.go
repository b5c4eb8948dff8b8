// Package benchprovider serves the OpenAI Chat Completions API on
// loopback for the benchmark commands (bench/scale, bench/wan), answering
// every request at once with one short streamed reply, so that `panto -c
// PROMPT` runs a real turn without a model. The tests'
// internal/testkit/fakeprovider needs a testing.TB; these commands have
// none, and need only the one answer.
package benchprovider

import (
	"fmt"
	"io"
	"net"
	"net/http"
)

// Start serves the API on a free loopback port. It returns the base URL
// (with /v1) and a function that stops the server.
func Start() (baseURL string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("fake provider: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(streamReply)}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	return "http://" + ln.Addr().String() + "/v1", func() { srv.Close() }, nil
}

// streamReply answers a chat completion as the API streams one: the
// text, the finish reason, then the usage.
func streamReply(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no route","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	const head = `{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1767225600,"model":"bench-model",`
	for _, chunk := range []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"Noted: the benchmark's turn is answered."},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		head + `"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129}}`,
	} {
		fmt.Fprintf(w, "data: %s\n\n", chunk)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
