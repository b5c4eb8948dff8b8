package miniotest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
)

// AsUser creates a user on the MinIO server s whose only permissions are
// policy (an IAM policy document, JSON, as README.md's policies are
// written), through MinIO's admin API with the root credentials, and
// returns a view of s that speaks as that user: its Env, AWSEnv,
// SetCredentials and Client carry the user's credentials. The view does
// not own the server (its Stop does nothing). Only a MinIO has users.
func (s *Server) AsUser(t testing.TB, policy string) *Server {
	t.Helper()
	if s.Kind != MinIO {
		t.Fatalf("miniotest: AsUser needs a MinIO server, not %s", s.Kind.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := &Server{Kind: s.Kind, Addr: s.Addr, accessKey: "user-" + randomHex(6), secretKey: randomHex(16)}
	if err := s.addUser(ctx, u.accessKey, u.secretKey, policy); err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	return u
}

// addUser adds the user with a policy of its own name.
func (s *Server) addUser(ctx context.Context, accessKey, secretKey, policy string) error {
	adm, err := madmin.New(s.Addr, s.accessKey, s.secretKey, false)
	if err != nil {
		return fmt.Errorf("admin client of %s: %w", s.Addr, err)
	}
	name := "policy-" + accessKey
	if err := adm.AddCannedPolicy(ctx, name, []byte(policy)); err != nil {
		return fmt.Errorf("add policy %s: %w", name, err)
	}
	if err := adm.AddUser(ctx, accessKey, secretKey); err != nil {
		return fmt.Errorf("add user %s: %w", accessKey, err)
	}
	if _, err := adm.AttachPolicy(ctx, madmin.PolicyAssociationReq{Policies: []string{name}, User: accessKey}); err != nil {
		return fmt.Errorf("attach policy %s to %s: %w", name, accessKey, err)
	}
	return nil
}
