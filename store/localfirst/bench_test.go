package localfirst

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// The targets of docs/DESIGN.md §10 and the issue, measured on a local
// MinIO (README, "Buckets and outages"):
//
//	go test -run '^$' -bench . -benchtime 200x ./store/localfirst/
//
// BenchmarkPromptDurable: an acknowledged append (the prompt before the
// provider is called) with the bucket up, frozen (SIGSTOP) and dead.
// BenchmarkShippingLag: from an append's return to the shipper's record
// that the bucket holds it.

func benchStore(b *testing.B, srv *miniotest.Server, bucket string) *Store {
	b.Helper()
	url := "s3://" + bucket + "/bench"
	s, err := Open(context.Background(), Options{
		Dir: b.TempDir(), Name: url, Unreachable: objstore.IsUnreachable,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			return objstore.Open(ctx, url, objstore.WithEndpoint(srv.Endpoint()), objstore.WithS3Options(srv.SetCredentials))
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func prompt(i int) []agent.PersistentMessage {
	return []agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("prompt %d: summarise the diff and list what the tests miss", i))}}
}

// percentiles reports p50 and p99 of ds in ms.
func percentiles(b *testing.B, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

func BenchmarkPromptDurable(b *testing.B) {
	for _, state := range []string{"up", "frozen", "dead"} {
		b.Run(state, func(b *testing.B) {
			srv := miniotest.New(b)
			bucket := srv.NewBucket(b)
			switch state {
			case "frozen":
				if err := srv.Freeze(); err != nil {
					b.Fatal(err)
				}
				defer srv.Thaw()
			case "dead":
				srv.Kill()
			}
			s := benchStore(b, srv, bucket)
			defer s.Close(context.Background())
			sess := s.Create()
			ctx := context.Background()
			var ds []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				if err := sess.Append(ctx, prompt(i)); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
				i++
			}
			percentiles(b, ds)
		})
	}
}

func BenchmarkShippingLag(b *testing.B) {
	srv := miniotest.Shared(b)
	s := benchStore(b, srv, srv.NewBucket(b))
	defer s.Close(context.Background())
	sess := s.Create()
	ctx := context.Background()
	var ds []time.Duration
	i := 0
	for b.Loop() {
		if err := sess.Append(ctx, prompt(i)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		want, err := store.Head(ctx, s.local, sess.Info.ID)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if cp, ok := s.shipped.get(sess.Info.ID); ok && cp.Length >= want.Length {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		ds = append(ds, time.Since(start))
		i++
	}
	percentiles(b, ds)
}
