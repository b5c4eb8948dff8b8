package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"testing"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TestPayloadSigning: a PUT's body is signed (its sha256 in the SigV4
// payload hash) only over plain HTTP to another host.
func TestPayloadSigning(t *testing.T) {
	t.Parallel()
	body := []byte("a segment")
	sum := sha256.Sum256(body)
	signed := hex.EncodeToString(sum[:])
	for _, c := range []struct{ endpoint, want string }{
		{"https://s3.us-east-1.amazonaws.com/b/k", "UNSIGNED-PAYLOAD"},
		{"https://minio.example:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://127.0.0.1:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://127.9.8.7:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://[::1]:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://localhost:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://10.1.2.3:9000/b/k", signed},
		{"http://minio.example:9000/b/k", signed},
		{"http://localhost.example/b/k", signed},
	} {
		req := smithyhttp.NewStackRequest().(*smithyhttp.Request)
		u, err := url.Parse(c.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		req.URL = u
		if req, err = req.SetStream(bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		var got string
		next := middleware.FinalizeHandlerFunc(func(ctx context.Context, in middleware.FinalizeInput) (middleware.FinalizeOutput, middleware.Metadata, error) {
			got = v4.GetPayloadHash(ctx)
			return middleware.FinalizeOutput{}, middleware.Metadata{}, nil
		})
		if _, _, err := (payloadSigning{}).HandleFinalize(context.Background(), middleware.FinalizeInput{Request: req}, next); err != nil {
			t.Fatalf("%s: %v", c.endpoint, err)
		}
		if got != c.want {
			t.Errorf("%s: payload hash %q, want %q", c.endpoint, got, c.want)
		}
	}
}
