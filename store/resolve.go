package store

import (
	"slices"
	"strings"

	"github.com/panto-dev/panto/agent"
)

// Resolution is what ResolvePrefix found for a prefix.
type Resolution struct {
	// ID is the one live session the prefix names.
	ID string
	// Gone, when no live session matches, is the one deleted session the
	// prefix names: the store says it was deleted, with its tombstone.
	Gone string
}

// ResolvePrefix resolves an id prefix the way every store does, among
// ids (the sessions the store lists) and deleted (its tombstones):
//
//   - the ids that start with prefix, other than prefix itself (a full id
//     is the store's to look up first, without a listing), not deleted,
//     and that keep accepts (nil: all; a store checks there what its
//     listing may not know, e.g. that the file is still there);
//   - one of them is the Resolution's ID; several are an
//     *agent.AmbiguousError (errors.Is agent.ErrAmbiguousSessionID);
//   - none: when exactly one deleted session starts with prefix, it is
//     the Resolution's Gone; otherwise the Resolution is empty and the
//     store reports the session not found (or looks further).
func ResolvePrefix(prefix string, ids []string, deleted map[string]bool, keep func(id string) (bool, error)) (Resolution, error) {
	var matches []string
	for _, id := range PrefixCandidates(prefix, ids, deleted) {
		if keep != nil {
			ok, err := keep(id)
			if err != nil {
				return Resolution{}, err
			}
			if !ok {
				continue
			}
		}
		matches = append(matches, id)
	}
	switch len(matches) {
	case 1:
		return Resolution{ID: matches[0]}, nil
	case 0:
		var gone []string
		for id := range deleted {
			if id != prefix && strings.HasPrefix(id, prefix) {
				gone = append(gone, id)
			}
		}
		if len(gone) == 1 {
			return Resolution{Gone: gone[0]}, nil
		}
		return Resolution{}, nil
	}
	slices.Sort(matches)
	return Resolution{}, agent.AmbiguousError(prefix, matches)
}

// PrefixCandidates are the ids ResolvePrefix considers: those that start
// with prefix, other than prefix itself, and are not deleted.
func PrefixCandidates(prefix string, ids []string, deleted map[string]bool) []string {
	var out []string
	for _, id := range ids {
		if id != prefix && strings.HasPrefix(id, prefix) && !deleted[id] {
			out = append(out, id)
		}
	}
	return out
}
