package localfirst

import (
	"strings"
	"testing"
)

func TestReplicaName(t *testing.T) {
	base := replicaName("s3://bucket/team/panto", "http://127.0.0.1:9000")
	for _, tc := range []struct {
		name          string
		url, endpoint string
		same          bool
	}{
		{"the same store", "s3://bucket/team/panto/", "http://127.0.0.1:9000/", true},
		{"another endpoint", "s3://bucket/team/panto", "http://10.0.0.2:9000", false},
		{"another prefix", "s3://bucket/team", "http://127.0.0.1:9000", false},
		{"a prefix that reads alike once made safe", "s3://bucket/team_panto", "http://127.0.0.1:9000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := replicaName(tc.url, tc.endpoint)
			if (got == base) != tc.same {
				t.Errorf("replicaName(%q, %q) = %q, base %q: same %v, want %v", tc.url, tc.endpoint, got, base, got == base, tc.same)
			}
			if strings.ContainsAny(got, `/\:`) || strings.HasPrefix(got, ".") {
				t.Errorf("replicaName(%q) = %q: not a plain directory name", tc.url, got)
			}
		})
	}
}
