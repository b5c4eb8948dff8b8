package store_test

import (
	"errors"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// TestResolvePrefix: the prefix rules every store shares.
func TestResolvePrefix(t *testing.T) {
	t.Parallel()
	ids := []string{"abc1", "abd2", "abd3", "x9"}
	errBoom := errors.New("boom")
	for _, c := range []struct {
		name    string
		prefix  string
		deleted []string
		keep    func(string) (bool, error)
		want    store.Resolution
		err     error
	}{
		{name: "one match", prefix: "abc", want: store.Resolution{ID: "abc1"}},
		{name: "several", prefix: "ab", err: agent.ErrAmbiguousSessionID},
		{name: "a deleted one does not count", prefix: "abd", deleted: []string{"abd3"}, want: store.Resolution{ID: "abd2"}},
		{name: "keep refuses one", prefix: "abd", keep: func(id string) (bool, error) { return id == "abd3", nil }, want: store.Resolution{ID: "abd3"}},
		{name: "keep fails", prefix: "abd", keep: func(string) (bool, error) { return false, errBoom }, err: errBoom},
		{name: "the full id is the caller's", prefix: "x9", want: store.Resolution{}},
		{name: "none, one deleted", prefix: "zz", deleted: []string{"zz7"}, want: store.Resolution{Gone: "zz7"}},
		{name: "none, two deleted", prefix: "zz", deleted: []string{"zz7", "zz8"}, want: store.Resolution{}},
		{name: "none, the deleted one is the prefix itself", prefix: "zz7", deleted: []string{"zz7"}, want: store.Resolution{}},
		{name: "nothing", prefix: "q", want: store.Resolution{}},
	} {
		deleted := map[string]bool{}
		for _, id := range c.deleted {
			deleted[id] = true
		}
		got, err := store.ResolvePrefix(c.prefix, append(ids, c.deleted...), deleted, c.keep)
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", c.name, got, err, c.want, c.err)
		}
	}
}
