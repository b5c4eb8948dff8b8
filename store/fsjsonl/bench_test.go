package fsjsonl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// BenchmarkAppend appends one message per op to one session, fsync
// included.
func BenchmarkAppend(b *testing.B) {
	s := open(b, b.TempDir())
	ctx := context.Background()
	msg := []agent.PersistentMessage{{
		Message:  agent.AssistantText(strings.Repeat("An answer of a realistic length. ", 12)),
		Identity: agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://llm.test/v1", Model: "m"},
	}}
	if err := s.AppendMessages(ctx, "bench", msg); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.AppendMessages(ctx, "bench", msg); err != nil {
			b.Fatal(err)
		}
	}
}

// catalog writes n sessions of 8 messages (about 2.5 KB each) into dir,
// as the store would write them, and returns their ids.
func catalog(b *testing.B, dir string, n int) []string {
	b.Helper()
	ids := make([]string, n)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range ids {
		id := agent.NewSessionID()
		ids[i] = id
		var msgs []agent.PersistentMessage
		for k := range 8 {
			m := agent.UserText(fmt.Sprintf("question %d of session %d: %s", k, i, strings.Repeat("words ", 40)))
			if k%2 == 1 {
				m = agent.AssistantText(strings.Repeat("answer ", 40))
			}
			msgs = append(msgs, agent.PersistentMessage{Message: m, Identity: agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, Model: "m"}})
		}
		data, err := sessionlog.EncodeBatch(id, true, msgs[:4], at.Add(time.Duration(i)*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		more, err := sessionlog.EncodeBatch(id, false, msgs[4:], at.Add(time.Duration(i)*time.Second+time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+fsjsonl.Ext), append(data, more...), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// BenchmarkList lists a catalog. cold: no cache file (every file is read);
// warm: a fresh handle with the cache file in place (as a new panto
// process finds it); hot: the same handle again (cache in memory).
func BenchmarkList(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		dir := b.TempDir()
		catalog(b, dir, n)
		ctx := context.Background()
		list := func(b *testing.B, s *fsjsonl.Store) {
			infos, err := s.List(ctx)
			if err != nil || len(infos) != n {
				b.Fatalf("List: %d sessions, %v", len(infos), err)
			}
		}
		b.Run(fmt.Sprintf("sessions=%d/cold", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				os.Remove(filepath.Join(dir, fsjsonl.IndexFile))
				s := open(b, dir)
				b.StartTimer()
				list(b, s)
			}
		})
		b.Run(fmt.Sprintf("sessions=%d/warm", n), func(b *testing.B) {
			list(b, open(b, dir))
			for b.Loop() {
				list(b, open(b, dir))
			}
		})
		b.Run(fmt.Sprintf("sessions=%d/hot", n), func(b *testing.B) {
			s := open(b, dir)
			list(b, s)
			for b.Loop() {
				list(b, s)
			}
		})
	}
}

// BenchmarkResolveLatest resolves a unique 8-character prefix, and finds
// the latest session, in a catalog of 10,000 sessions with its cache file
// in place, each op on a fresh handle (as a new panto process).
func BenchmarkResolveLatest(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	ids := catalog(b, dir, n)
	ctx := context.Background()
	if _, err := open(b, dir).List(ctx); err != nil { // builds the cache file
		b.Fatal(err)
	}
	b.Run("resolve-prefix/sessions=10000", func(b *testing.B) {
		i := 0
		for b.Loop() {
			id := ids[i%n]
			i++
			sess, err := open(b, dir).Resolve(ctx, id[:8])
			if err != nil || sess.Info.ID != id {
				b.Fatalf("Resolve(%s) = %v, %v", id[:8], sess, err)
			}
		}
	})
	b.Run("resolve-full-id/sessions=10000", func(b *testing.B) {
		i := 0
		for b.Loop() {
			id := ids[i%n]
			i++
			if _, err := open(b, dir).Resolve(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("latest/sessions=10000", func(b *testing.B) {
		for b.Loop() {
			sess, err := open(b, dir).Latest(ctx)
			if err != nil || sess.Info.ID != ids[n-1] {
				b.Fatalf("Latest = %v, %v; want %s", sess, err, ids[n-1])
			}
		}
	})
}

// BenchmarkLogsChanged is the cost of seeing every change below what was
// listed before: Logs of a realistic catalog (1,000 sessions, about 50 MB,
// from internal/testkit/sessiongen) after one message was appended to some share
// of its files. Each changed file is read again and hashed in full (its
// cached prefix must still hash the same before its summary is resumed);
// an unchanged one costs its stat.
func BenchmarkLogsChanged(b *testing.B) {
	dir := b.TempDir()
	g := sessiongen.New(1)
	at := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	var ids []string
	var total int64
	for i := range 1000 {
		id := fmt.Sprintf("%032x", i+1)
		data, err := g.Session(id, 10_000+int(g.Rand().ExpFloat64()*40_000), at)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+fsjsonl.Ext), data, 0o600); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
		total += int64(len(data))
	}
	ctx := context.Background()
	s := open(b, dir)
	if _, err := s.Logs(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("catalog: %d sessions, %d bytes", len(ids), total)
	for _, share := range []int{0, 1, 10, 100} {
		b.Run(fmt.Sprintf("changed=%d%%", share), func(b *testing.B) {
			n := len(ids) * share / 100
			for b.Loop() {
				b.StopTimer()
				for _, id := range ids[:n] {
					if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{{Message: agent.UserText("one more question")}}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if logs, err := s.Logs(ctx); err != nil || len(logs) != len(ids) {
					b.Fatalf("Logs: %d, %v", len(logs), err)
				}
			}
		})
	}
}

// BenchmarkListingToken: the token of a directory of 20,000 sessions,
// against the listing it can spare (Logs, its cache warm), and what a
// sync that lists pays for both (the listing takes the token's stats).
func BenchmarkListingToken(b *testing.B) {
	dir := b.TempDir()
	for range 20000 {
		id := agent.NewSessionID()
		line, err := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{{Message: agent.UserText("hello")}}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), line, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err := fsjsonl.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("token", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.ListingToken(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("logs", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Logs(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("token+logs", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.ListingToken(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Logs(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
