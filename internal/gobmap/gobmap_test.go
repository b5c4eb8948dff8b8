package gobmap

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
)

type entry struct {
	Name  string
	Sizes []int64
	Next  *entry
}

func roundTrip(t *testing.T, m map[string]*entry) map[string]*entry {
	t.Helper()
	var buf bytes.Buffer
	enc := gob.NewEncoder(&buf)
	if err := Encode(enc, m); err != nil {
		t.Fatal(err)
	}
	got, err := Decode[string, *entry](gob.NewDecoder(&buf))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRoundTrip: maps of no entries, of fewer than a chunk, of exactly
// a chunk and of several with a part left over come back equal, entries
// with empty fields too (gob sends no zero field, so a decoder that
// reused the last chunk's entries unzeroed would fill them in).
func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, Chunk - 1, Chunk, 3*Chunk + 17} {
		m := map[string]*entry{}
		for i := range n {
			e := &entry{}
			if i%3 != 0 {
				e.Name, e.Sizes = fmt.Sprint("e", i), []int64{int64(i), 2}
			}
			if i%5 == 1 {
				e.Next = &entry{Name: "next"}
			}
			m[fmt.Sprint(i)] = e
		}
		got := roundTrip(t, m)
		if !maps.EqualFunc(got, m, func(a, b *entry) bool { return reflect.DeepEqual(a, b) }) {
			t.Fatalf("%d entries: got %d back, or different ones", n, len(got))
		}
	}
}

// TestMessagesStaySmall: no message of a large map holds more than a
// chunk, which is the point of the package.
func TestMessagesStaySmall(t *testing.T) {
	m := map[int]string{}
	for i := range 10 * Chunk {
		m[i] = "some text of an entry"
	}
	var whole, chunked bytes.Buffer
	if err := gob.NewEncoder(&whole).Encode(m); err != nil {
		t.Fatal(err)
	}
	enc := gob.NewEncoder(&chunked)
	if err := Encode(enc, m); err != nil {
		t.Fatal(err)
	}
	dec := gob.NewDecoder(&chunked)
	var n int
	if err := dec.Decode(&n); err != nil || n != len(m) {
		t.Fatalf("length %d, %v", n, err)
	}
	messages := 0
	for {
		var chunk []pair[int, string]
		if err := dec.Decode(&chunk); err != nil {
			break
		}
		if len(chunk) > Chunk {
			t.Fatalf("a message of %d entries", len(chunk))
		}
		messages++
	}
	if messages != 10 {
		t.Fatalf("%d messages, want 10", messages)
	}
}

// TestTorn: a stream cut anywhere, or one that promises more than it
// holds, is an error, never a short map taken for the whole.
func TestTorn(t *testing.T) {
	m := map[string]*entry{}
	for i := range 2*Chunk + 5 {
		m[fmt.Sprint(i)] = &entry{Name: "x"}
	}
	var buf bytes.Buffer
	if err := Encode(gob.NewEncoder(&buf), m); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	for _, cut := range []int{1, len(full) / 3, len(full) / 2, len(full) - 1} {
		if got, err := Decode[string, *entry](gob.NewDecoder(bytes.NewReader(full[:cut]))); err == nil {
			t.Fatalf("cut at %d of %d: %d entries and no error", cut, len(full), len(got))
		}
	}
	var lying bytes.Buffer
	enc := gob.NewEncoder(&lying)
	if err := enc.Encode(5); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode([]pair[string, *entry]{{"a", &entry{Name: "a"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode[string, *entry](gob.NewDecoder(&lying)); !errors.Is(err, ErrShort) {
		t.Fatalf("promised 5, held 1: %v", err)
	}
}

// FuzzDecode: Decode never panics, and what it accepts encodes again to
// a stream that decodes to the same map.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	if err := Encode(gob.NewEncoder(&buf), map[string]int64{"a": 1, "b": 2}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:buf.Len()/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Decode[string, int64](gob.NewDecoder(bytes.NewReader(data)))
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := Encode(gob.NewEncoder(&again), got); err != nil {
			t.Fatal(err)
		}
		back, err := Decode[string, int64](gob.NewDecoder(&again))
		if err != nil || !maps.Equal(back, got) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
