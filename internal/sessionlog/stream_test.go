package sessionlog_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

func streamLog(t *testing.T, sizes ...int) ([]byte, [][]byte) {
	t.Helper()
	var all []byte
	var batches [][]byte
	for i, n := range sizes {
		var msgs []agent.PersistentMessage
		for k := range 1 + i%3 {
			msgs = append(msgs, agent.PersistentMessage{Message: agent.UserText(fmt.Sprintf("%d.%d %s", i, k, strings.Repeat("x", n)))})
		}
		b, err := sessionlog.EncodeBatch("s", i == 0, msgs, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
		batches = append(batches, b)
	}
	return all, batches
}

// TestBatches: chunks are whole batches, at most the bound unless one
// batch alone is larger, and together are the stream, however the reader
// splits its reads.
func TestBatches(t *testing.T) {
	sizes := []int{10, 500, 30, 5000, 100, 40000, 20, 20, 20, 3000}
	all, batches := streamLog(t, sizes...)
	isBatches := func(chunk []byte) bool { // chunk is a run of whole batches
		for len(chunk) > 0 {
			found := false
			for _, b := range batches {
				if bytes.HasPrefix(chunk, b) {
					chunk, found = chunk[len(b):], true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	for _, max := range []int{1, 1000, 4096, 1 << 20} {
		for name, r := range map[string]io.Reader{
			"whole":    bytes.NewReader(all),
			"one byte": iotest.OneByteReader(bytes.NewReader(all)),
			"halves":   iotest.HalfReader(bytes.NewReader(all)),
		} {
			b := sessionlog.NewBatches(r, "s", max)
			var got []byte
			for {
				chunk, err := b.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("max %d, %s: %v", max, name, err)
				}
				if !isBatches(chunk) {
					t.Fatalf("max %d, %s: a chunk that is not whole batches", max, name)
				}
				if len(chunk) > max {
					// Only a single batch may exceed the bound.
					single := false
					for _, bb := range batches {
						single = single || bytes.Equal(chunk, bb)
					}
					if !single {
						t.Fatalf("max %d, %s: %d bytes of several batches", max, name, len(chunk))
					}
				}
				got = append(got, chunk...)
			}
			if !bytes.Equal(got, all) {
				t.Fatalf("max %d, %s: the chunks are not the stream", max, name)
			}
		}
	}
	// A stream cut inside a batch is an error, not a short copy.
	b := sessionlog.NewBatches(bytes.NewReader(all[:len(all)-10]), "s", 4096)
	var err error
	for err == nil {
		_, err = b.Next()
	}
	if !errors.Is(err, sessionlog.ErrMalformed) {
		t.Errorf("a stream cut inside a batch: %v, want ErrMalformed", err)
	}
}

func TestCheck(t *testing.T) {
	all, _ := streamLog(t, 10, 200, 3000)
	sum := sha256.Sum256(all)
	info, err := sessionlog.Check("s", "s", bytes.NewReader(all), int64(len(all)), hex.EncodeToString(sum[:]))
	if err != nil || info.MessageCount != 6 {
		t.Fatalf("Check of a good log: %+v, %v", info, err)
	}
	bad := bytes.Clone(all)
	bad[len(bad)/2] = 0x01 // a control character inside a line
	for name, c := range map[string]struct {
		data        []byte
		id, sha     string
		length      int64
		wantMalform bool
	}{
		"flipped":      {bad, "s", "", int64(len(bad)), true},
		"other id":     {all, "t", "", int64(len(all)), true},
		"short":        {all, "s", "", int64(len(all)) + 1, false},
		"other sha256": {all, "s", strings.Repeat("0", 64), int64(len(all)), false},
		"torn":         {all[:len(all)-1], "s", "", int64(len(all) - 1), true},
	} {
		_, err := sessionlog.Check("s", c.id, bytes.NewReader(c.data), c.length, c.sha)
		if err == nil || errors.Is(err, sessionlog.ErrMalformed) != c.wantMalform {
			t.Errorf("%s: %v", name, err)
		}
	}
}
