package objstore

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/smithy-go"
)

// ErrPermission: the server refused a request because the credentials
// may not do it (403 AccessDenied and kin). The error is a
// *PermissionError naming the permission to grant.
var ErrPermission = errors.New("permission denied")

// PermissionError is a request the server refused for want of a
// permission: one line that names the S3 operation, the store's prefix
// and the IAM permission that would let it (a policy's Action and
// Resource, as README.md's policies write them). The server's own answer
// (its message, request id) stays in Err, for -v and errors.As; the
// request trace (-v, PANTO_TRACE) shows each refused request.
type PermissionError struct {
	Op         string // the S3 operation: GetObject, HeadObject, PutObject, DeleteObject(s), ListObjectsV2
	Bucket     string
	Prefix     string // the store's prefix: "" or ends in "/"
	Key        string // the object, or the prefix a listing asked for
	Permission string // the IAM action to grant: s3:PutObject
	Code       string // the server's error code: AccessDenied
	Err        error  // the SDK's error
}

func (e *PermissionError) Error() string {
	msg := fmt.Sprintf("%s refused (%s) under s3://%s/%s: grant %s", e.Op, e.Code, e.Bucket, e.Prefix, e.Grant())
	if e.Permission == "s3:GetObject" {
		// AWS S3 answers a GET of a missing object 403 unless the
		// credentials may list the bucket; MinIO answers 404.
		msg += " (on AWS S3 also s3:ListBucket: without it a missing object answers 403)"
	}
	return msg
}

// Grant is the permission and the resource it is needed on, as a policy
// writes them: s3:PutObject on arn:aws:s3:::team-bucket/team/alice/*.
func (e *PermissionError) Grant() string {
	if e.Permission == "s3:ListBucket" {
		return fmt.Sprintf("s3:ListBucket on arn:aws:s3:::%s with the condition s3:prefix = %s*", e.Bucket, e.Prefix)
	}
	return fmt.Sprintf("%s on arn:aws:s3:::%s/%s*", e.Permission, e.Bucket, e.Prefix)
}

// Is makes errors.Is(err, ErrPermission) true, and errForbidden, the
// bucket seam's word for a 403, which the protocol branches on (probe.go).
func (e *PermissionError) Is(target error) bool {
	return target == ErrPermission || target == errForbidden
}

func (e *PermissionError) Unwrap() error { return e.Err }

// permissions maps each S3 operation the store sends to the IAM action
// that allows it.
var permissions = map[string]string{
	"GetObject":     "s3:GetObject",
	"HeadObject":    "s3:GetObject",
	"PutObject":     "s3:PutObject",
	"DeleteObject":  "s3:DeleteObject",
	"DeleteObjects": "s3:DeleteObject", // the batch (deleteKeys): IAM authorizes each key as a DeleteObject
	"ListObjectsV2": "s3:ListBucket",
}

// credentialCodes are the 403 answers that reject the credentials
// themselves (unknown key, bad signature, expired token, skewed clock),
// not a permission: explainOpenError says what to fix for those.
var credentialCodes = map[string]bool{
	"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "InvalidToken": true,
	"ExpiredToken": true, "TokenRefreshRequired": true, "RequestTimeTooSkewed": true,
	"InvalidSecurity": true, "AuthorizationHeaderMalformed": true,
}

// requestFailed is the error of a request to the bucket (verb: get, put,
// list, delete, head; key: the full key) that failed: a *PermissionError
// when the server refused it for want of a permission, else the request's
// error classified (classify), after "verb key:".
func (b *s3Bucket) requestFailed(verb, key string, err error) error {
	if p := permissionError(b.name, b.prefix, key, err); p != nil {
		return p
	}
	return fmt.Errorf("%s %s: %w", verb, key, classify(err))
}

// permissionError returns err as a *PermissionError if the server refused
// the request for want of a permission, else nil.
func permissionError(bucketName, prefix, key string, err error) *PermissionError {
	var p *PermissionError
	if errors.As(err, &p) {
		return p
	}
	var status interface{ HTTPStatusCode() int }
	if !errors.As(err, &status) || status.HTTPStatusCode() != http.StatusForbidden {
		return nil
	}
	code := "403 Forbidden" // a HEAD's answer has no body
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() != "" && api.ErrorCode() != "Forbidden" {
		code = api.ErrorCode()
	}
	if credentialCodes[code] {
		return nil
	}
	op := ""
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		op = oe.Operation()
	}
	perm, ok := permissions[op]
	if !ok {
		perm = "s3:" + strings.TrimSuffix(op, "V2")
	}
	return &PermissionError{Op: op, Bucket: bucketName, Prefix: prefix, Key: key, Permission: perm, Code: code, Err: err}
}
