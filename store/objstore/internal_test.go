package objstore

import "time"

// SetIndexPruneAfter lets tests see index deltas deleted without waiting
// for indexPruneAfter.
func SetIndexPruneAfter(s *Store, d time.Duration) { s.indexPruneAfter = d }
