package miniotest

import (
	"net/http"
	"strings"
)

// RequestClass names an S3 request as the server reads it, for the tests
// that count requests: "LIST" for a listing of the bucket, else the
// method. A listing is a GET of the bucket itself (path-style, /BUCKET or
// /BUCKET/, as every test client addresses it) whatever its query says
// (list-type=2, a prefix, a delimiter, versions, uploads, none at all),
// unless the query names one of the bucket's configuration documents
// (?location and the like). The path alone cannot tell: a LIST of a
// session's objects is a GET of /BUCKET?prefix=PFX/sessions/ID/, no
// longer a path than the bucket's.
func RequestClass(r *http.Request) string {
	if r.Method != http.MethodGet || strings.Contains(strings.Trim(r.URL.Path, "/"), "/") || strings.Trim(r.URL.Path, "/") == "" {
		return r.Method
	}
	q := r.URL.Query()
	for _, sub := range bucketDocuments {
		if q.Has(sub) {
			return r.Method
		}
	}
	return "LIST"
}

// bucketDocuments are the sub-resources a GET of a bucket reads instead of
// its listing.
var bucketDocuments = []string{
	"location", "versioning", "policy", "policyStatus", "acl", "lifecycle", "cors", "tagging", "object-lock",
	"encryption", "notification", "website", "logging", "replication", "requestPayment", "accelerate",
	"ownershipControls", "publicAccessBlock", "intelligent-tiering", "inventory", "metrics", "analytics",
}
