package manifest

import (
	"bytes"
	"encoding/json"
	"time"
)

// FeatureTombstones is the marker feature of a prefix that holds deleted
// sessions: a reader that does not know tombstones would list them, and
// a writer bring them back, so such a panto must refuse the prefix.
const FeatureTombstones = "tombstones"

// FeatureIndexBases is the marker feature of a prefix whose writers
// replace each index shard's base (If-Match) instead of writing deltas
// after it: its readers read the bases alone. An older panto would write
// deltas those readers do not look for, so it must refuse the prefix.
const FeatureIndexBases = "index-bases"

// FeatureIndexLog is the marker feature of index format 4 (docs/DESIGN.md
// §P3): 256 partitions instead of 16 shards, and a log of commits that
// keeps the newest sessions and says what changed. An older panto would
// write the 16 shards nobody reads any more, so it must refuse the
// prefix.
const FeatureIndexLog = "index-log"

// RecentSize is how many of the newest sessions an index log commit
// holds (IndexShard.Recent): a page of `panto sessions` and `panto -c`
// read that commit alone.
const RecentSize = 64

// UnfoldedSize is how many entries the Unfolded set of an index log
// commit holds before a writer folds the oldest into their partitions:
// each is carried, Resume and all, by every commit until it is folded,
// so the set stays the sessions being written now.
const UnfoldedSize = 32

// FeatureIndexUnfolded is the marker feature of a format-4 index whose
// checkpoints commit entries to the log before their partitions take
// them (IndexShard.Unfolded, docs/DESIGN.md §P3): a panto that read the
// partitions alone would miss those sessions, or drop the set from the
// commits it writes, so it must refuse the prefix.
const FeatureIndexUnfolded = "index-unfolded"

// FeatureIndexHeads is the marker feature of a format-4 index that keeps
// a head per project (IndexShard with Shard HeadName, docs/DESIGN.md
// §P3): every write that moves entries into the partitions or a run
// writes the heads of their projects first, so that a project's newest
// page reads its head. A panto that did not would leave the heads behind
// the partitions, so it must refuse the prefix.
const FeatureIndexHeads = "index-heads"

// FeatureIndexWide is the marker feature of a format-4 index whose
// partitions are named by three characters of an id (4,096), not two
// (docs/DESIGN.md §P3): a sync that read a catalog past WideAfter
// sessions moves it, so that a partition, which a fold step and a
// resolve of an older session read or write whole, stays small. A panto
// that read and wrote the 256 would miss what moved, so it must refuse
// the prefix.
const FeatureIndexWide = "index-wide"

// FeatureIndexRunDeltas is the marker feature of a format-4 index whose
// log commits stored against a base store their run pages as a delta
// too (IndexShard.RunsDelta, docs/DESIGN.md §P3): a panto that took a
// commit's Runs for the whole list would miss the base's pages, and
// drop them from the commits it writes, so it must refuse the prefix.
const FeatureIndexRunDeltas = "index-run-deltas"

// WideAfter is how many sessions an index holds before it moves to
// partitions of three characters: there a partition of 256 holds about
// 128 sessions (26 KB), one of 4,096 eight.
const WideAfter = 32768

// LogChanges is how many changes an index log commit lists at most: a
// bulk write's commit past it lists none (IndexShard.Omitted), so that
// the newest commit, which every reader reads, stays small.
const LogChanges = 64

// Tombstone is what the bucket keeps of a deleted session: in its index
// shard, and as the object that takes the place of its first segment
// (and of the segment after its last), so that the id can never be
// written again. It holds no content: when, and the length and sha256 of
// the log at deletion.
type Tombstone struct {
	ID      string
	Deleted time.Time
	Length  int64
	SHA256  string
}

// tombstoneFormat names a tombstone object. Stored where a segment would
// be, it is compressed like one; decompressed, its first bytes tell it from
// a log (which starts with a line of type session or message).
const tombstoneFormat = "panto-tombstone"

var tombstonePrefix = []byte(`{"format":"` + tombstoneFormat + `"`)

type wireTombstoneObject struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	ID      string    `json:"id"`
	Deleted time.Time `json:"deleted"`
	Length  int64     `json:"length"`
	SHA256  string    `json:"sha256,omitempty"`
}

// EncodeTombstone returns the stored form of a tombstone object.
func EncodeTombstone(t Tombstone) []byte {
	data, _ := marshalWire(wireTombstoneObject{Format: tombstoneFormat, Version: Version, ID: t.ID, Deleted: t.Deleted.UTC(), Length: t.Length, SHA256: t.SHA256}) // plain fields always encode
	return data
}

// DecodeTombstone reports whether data, the raw (decompressed) bytes of
// an object read where a segment was expected, is a tombstone, and
// returns it.
func DecodeTombstone(data []byte) (Tombstone, bool) {
	if !bytes.HasPrefix(data, tombstonePrefix) {
		return Tombstone{}, false
	}
	var w wireTombstoneObject
	if json.Unmarshal(data, &w) != nil || w.Format != tombstoneFormat || w.ID == "" {
		return Tombstone{}, false
	}
	return Tombstone{ID: w.ID, Deleted: w.Deleted, Length: w.Length, SHA256: w.SHA256}, true
}
