package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 5)
	e.must(t, 0, "push", "--dir", dir, e.url)
	r := e.must(t, 0, "verify", "--json", e.url)
	if evs, sum := events(t, r.stdout); byEvent(evs)["verified"] != len(ids) || sum.Failed != 0 {
		t.Fatalf("verify of a good bucket: %v", byEvent(evs))
	}

	// Flip a bit in one segment of one session.
	ctx := context.Background()
	c := e.srv.Client(t)
	bad := ids[2]
	var key string
	for obj := range c.ListObjects(ctx, e.bucket, minio.ListObjectsOptions{Prefix: "panto/sessions/" + bad + "/seg/", Recursive: true}) {
		key = obj.Key
	}
	if key == "" {
		t.Fatalf("no segment of %s in the bucket", bad)
	}
	o, err := c.GetObject(ctx, e.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(o)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if _, err := c.PutObject(ctx, e.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	r = e.must(t, 1, "verify", "--json", e.url)
	evs, sum := events(t, r.stdout)
	if sum.Failed != 1 {
		t.Errorf("verify of a corrupt segment: %+v", sum)
	}
	for _, ev := range evs {
		if (ev.ID == bad) != (ev.Event == "failed") {
			t.Errorf("%s: %s", ev.ID, ev.Event)
		}
	}
	// Only the session asked for, by unique prefix.
	r = e.must(t, 0, "verify", "--json", e.url, ids[0][:10])
	if evs, _ := events(t, r.stdout); len(evs) != 1 || evs[0].ID != ids[0] {
		t.Errorf("verify of one session: %+v", evs)
	}
	if r := e.run(t, "verify", e.url, "zzzz"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("verify of an unknown id: exit %d %q", r.code, r.stderr)
	}
}
