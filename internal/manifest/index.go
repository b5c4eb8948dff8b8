package manifest

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Shards is the number of index shards.
const Shards = 16

const hexDigits = "0123456789abcdef"

// ShardOf returns the shard of a session id (or of an id prefix: every id
// with the prefix falls in the same shard). Random hex ids spread evenly
// over the 16 shards named by their first digit; any other valid first
// character maps deterministically onto one of them.
func ShardOf(id string) string {
	if id == "" {
		return "0"
	}
	c := id[0]
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		return string(c)
	default:
		return string(hexDigits[int(c)%Shards])
	}
}

// ShardNames returns the names of all shards.
func ShardNames() []string { return PartitionNames(1) }

// LogName is the Shard of an index log commit (docs/DESIGN.md §P3): a
// document spelled as a shard, whose Through is its number.
const LogName = "log"

// RunName is the Shard of a page of a run (docs/DESIGN.md §P3): the
// entries of a bulk write, for the partitions First..Last of its
// RunPage, that those partitions may not hold yet.
const RunName = "run"

// HeadName is the Shard of a project's head (docs/DESIGN.md §P3): the
// newest HeadSize entries (without Resume) that the partitions and runs
// hold of one project's sessions, or of every session that knows only its
// directory, and the tombstones of those deleted. Complete says it holds
// every one; otherwise each one it does not hold is no newer than the
// oldest it holds.
const HeadName = "head"

// HeadSize is how many sessions a project's head holds: a page of `panto
// sessions` in a project (50) and a few deletions' worth more.
const HeadSize = 64

// RunPage names one page of a run in a log commit (IndexShard.Runs): the
// object at Key holds Sessions entries of sessions in the partitions
// First through Last (by name), written by commit Commit.
type RunPage struct {
	Key         string
	First, Last string
	Sessions    int
	Commit      int64
}

// RunMerge is a merge of runs that writers without the catalog (agents)
// do a bounded step at a time, in partition order: the runs From (each
// named by the commit that added it, RunPage.Commit) are merged into the
// run Into, whose pages hold their entries of every partition before
// Next. The pages of From whose partitions all come before Next are
// retired; the others are still named, and hold the rest.
type RunMerge struct {
	Into int64
	From []int64
	Next string
}

// RunFold is a fold of runs into the partitions that writers without
// the catalog (agents) do a few partitions at a time, in partition
// order: the runs From (each named by the commit that added it) have
// their entries of every partition before Next in the partitions. The
// pages of From whose partitions all come before Next are retired.
type RunFold struct {
	From []int64
	Next string
}

// Covers reports whether the page may hold a session of partition name.
// A page written before the index widened names partitions of two
// characters and one after of three (IndexShard.Widened): both compare
// by the characters they share (ComparePartitions), so that each covers
// the partitions of either width within its range.
func (p RunPage) Covers(name string) bool {
	return ComparePartitions(p.First, name) <= 0 && ComparePartitions(name, p.Last) <= 0
}

// ComparePartitions orders partition names of any width by the
// characters they share: "7f" is neither before nor after "7f3", which
// it holds, and before "80a". Names of one width compare as strings.
func ComparePartitions(a, b string) int {
	n := min(len(a), len(b))
	return strings.Compare(a[:n], b[:n])
}

// PartitionOf returns the index partition of a session id at width 1
// (the 16 shards of format 3: ShardOf), 2 (the 256 partitions of an
// index-log prefix) or 3 (the 4,096 of a widened one, FeatureIndexWide):
// the id's first width characters, each mapped as ShardOf maps one. An
// id prefix of at least width characters falls in the partition of
// every id it starts.
func PartitionOf(id string, width int) string {
	width = min(max(width, 1), 3, max(len(id), 1))
	var b strings.Builder
	for i := range width {
		b.WriteString(ShardOf(id[i:]))
	}
	return b.String()
}

// PartitionNames returns the names of all partitions at width 1 (16), 2
// (256) or 3 (4,096), in order.
func PartitionNames(width int) []string {
	names := []string{""}
	for range min(max(width, 1), 3) {
		next := make([]string, 0, len(names)*Shards)
		for _, name := range names {
			for _, c := range hexDigits {
				next = append(next, name+string(c))
			}
		}
		names = next
	}
	return names
}

// IndexEntry is what the index knows of one session.
type IndexEntry struct {
	Info agent.SessionInfo
	// Length is the committed raw length; SHA256 the hex sha256 of it.
	Length int64
	SHA256 string
	// Resume is what a writer needs to append to the session at Length
	// without reading it; zero when the entry's writer did not record it.
	Resume Resume
}

// Resume is the state after a session's first Length bytes that a
// manifest keeps for the next append (its hash state and the line
// decoder's), and where the session's segments are: so that sync can
// append a tail to a session it has not read, in one request.
type Resume struct {
	// HashState is the marshalled crypto/sha256 state (a string, so that
	// entries compare with ==).
	HashState string
	// Lines, Format and SummaryVersion are the line decoder's state (the
	// summary is the entry's Info).
	Lines, Format, SummaryVersion int
	// Segments is the number of segments of the log at Length; Stored,
	// how many of them the stored manifest lists (0: none is stored).
	Segments, Stored int
	// Tail is where the segments the stored manifest does not list (the
	// last Segments−Stored) begin, ascending, as decimal offsets joined by
	// commas (a string, so that entries compare with ==); "" when not
	// known. A reader sends their GETs with the manifest's instead of
	// probing for one after another (§P4); they are a hint, each checked
	// as a probed segment is.
	Tail string
}

// Where is r without the append state: how many segments the log has,
// how many of them the stored manifest lists, and where the others begin.
// A commit's recent view carries it, so that a reader of a session it
// lists sends the GETs of the session's segments at once (§P4); an entry
// that holds it alone is not Resumable.
func (r Resume) Where() Resume { return Resume{Segments: r.Segments, Stored: r.Stored, Tail: r.Tail} }

// JoinOffsets is the Resume.Tail of segments starting at offs.
func JoinOffsets(offs []int64) string {
	var b []byte
	for i, o := range offs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, o, 10)
	}
	return string(b)
}

// TailOffsets returns where the segments Tail lists begin, or nil when
// it lists none (or is not a list of ascending offsets).
func (r Resume) TailOffsets() []int64 {
	if r.Tail == "" {
		return nil
	}
	parts := strings.Split(r.Tail, ",")
	offs := make([]int64, len(parts))
	for i, p := range parts {
		o, err := strconv.ParseInt(p, 10, 64)
		if err != nil || o < 0 || i > 0 && o <= offs[i-1] {
			return nil
		}
		offs[i] = o
	}
	return offs
}

// Resumable reports whether e carries the state of a current writer to
// append from: a summary that folds what this package folds, sane counts,
// and a hash state that sums to the entry's sha256 after exactly Length
// bytes (a damaged or foreign one is not resumed from, so it can never
// make an append's hashes wrong).
func (e IndexEntry) Resumable() bool {
	r := e.Resume
	if e.Length <= 0 || r.SummaryVersion != SummaryVersion || r.Segments < 1 || r.Stored < 0 || r.Stored > r.Segments || r.Lines < 1 || r.Format < 1 {
		return false
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary([]byte(r.HashState)); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == e.SHA256 && hashedLength(r.HashState) == e.Length
}

// hashedLength is the byte count a marshalled sha256 state records (its
// last 8 bytes, big-endian), or -1.
func hashedLength(state string) int64 {
	if len(state) < 8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64([]byte(state[len(state)-8:])))
}

// Manifest returns the manifest e resumes: its length, hashes and
// decoder state, and no segments (those before Length are not known; a
// writer appends after them, and reads the stored manifest before it
// writes one). Callers check Resumable first.
func (e IndexEntry) Manifest(id string) *Manifest {
	return &Manifest{
		ID: id, Length: e.Length, SHA256: e.SHA256, HashState: []byte(e.Resume.HashState),
		SummaryVersion: e.Resume.SummaryVersion, Segments: []Segment{},
		Decoder: sessionlog.Decoder{
			Line:   e.Resume.Lines,
			Header: &sessionlog.Header{Type: sessionlog.TypeSession, Version: e.Resume.Format, ID: id, Created: e.Info.Created},
			Info:   e.Info,
		},
	}
}

// IndexShard is one shard of the catalog index: a base, or a delta of one.
type IndexShard struct {
	Shard string
	// Through is the last delta folded into this base (0: none): readers
	// apply the deltas numbered from Through+1 on. The deltas up to
	// Pruned may have been deleted. Written is when the base was written.
	// Purge, when above Pruned, says the deltas up to it hold summaries
	// of sessions deleted since, and must be deleted now, not after the
	// usual delay: a deletion cut short between writing this base and
	// deleting them is finished by the next writer that reads it. All
	// four are zero in a delta.
	Through int64
	Pruned  int64
	Purge   int64
	Written time.Time
	// Omitted, in a log commit (Shard LogName, Through its number), is
	// how many changes of its write it does not list in Sessions and
	// Tombstones (a bulk write's, past LogChanges): a reader that wants
	// every change reads the partitions instead. Recent is the newest
	// sessions of the whole index as of this commit (at most RecentSize,
	// with Resume.Where alone): every live session it does not hold is
	// older than all it holds. Both are zero in a partition.
	Omitted int64
	// Complete, in a log commit, says Recent holds every live session of
	// the index (it never had to drop one for room), so a listing of any
	// length is Recent alone.
	Complete bool
	// DirHead, in a log commit (FeatureIndexHeads), says the head of the
	// sessions that know only their directory may hold some: a listing of
	// a work tree's sessions reads it beside its project's head.
	DirHead bool
	// DirFilter, in a log commit that says DirHead, is the dir filter of
	// the dirs head (dirfilter.go): DirFilterBytes long, or nil when
	// not known (a panto that predates it wrote a commit since the
	// first that said DirHead): then a work tree's listing reads the
	// dirs head whatever its root.
	DirFilter []byte
	// DirKeys, in a log commit that says DirHead, says every session
	// the dirs head took is in the head of its directory too (the head
	// of its Project.Key, which for such a session is its directory):
	// then a directory's listing reads that head alone. False when not
	// known (a panto that predates it wrote a commit since the first
	// that said DirHead, and put what it took in the dirs head alone).
	DirKeys bool
	// ClaimsSince, in a log commit, is the number of the first commit
	// from which on every writer honours the claims of directory heads
	// (Claims): a panto that predates them drops it from its commit, and
	// the next commit of one that does not says its own number. A claim
	// recorded in a project's head (Claimed) as of a commit before
	// ClaimsSince-1 may have missed a session (docs/DESIGN.md §P3,
	// "Claims"). 0: not known.
	ClaimsSince int64
	// Claims, in the head of a directory (the head of the sessions whose
	// Key is that directory), names the heads of the projects whose work
	// trees are rooted there that hold its sessions that know only their
	// directory too: a writer that puts such a session in this head puts
	// it in theirs, before its commit.
	Claims []string
	// Claimed, in a project's head, names the directories' heads whose
	// sessions that know only their directory this head holds too (each
	// with the number of the newest commit its claimer knew when it wrote
	// the claim in that directory's head): a listing of the work tree
	// rooted there need not read that head (ClaimsSince says until when
	// that holds).
	Claimed map[string]int64
	// Indexed, in a log commit, is about how many sessions the index
	// held when a writer last counted them (one that read the catalog;
	// a step of a fold, from the partitions it wrote), carried on by
	// every commit: a writer that holds no catalog folds the runs past
	// an eighth of it, as one that holds it does (0: not counted yet).
	Indexed int64
	// Widened, in a log commit, is the number of the commit that moved
	// the index to partitions of three characters (4,096; 0: two, 256),
	// carried on by every commit (FeatureIndexWide, docs/DESIGN.md §P3):
	// a writer whose partitions were of two characters learns from the
	// commit it builds on that nobody reads them any more.
	Widened int64
	// Base, in a log commit, is the number of the earlier commit whose
	// recent view this one's is stored against (0: stored whole): as
	// stored, Recent holds only the entries that differ from Base's;
	// WithBase makes it whole again (docs/DESIGN.md §P3).
	Base int64
	// BaseETag is the ETag of commit Base as its writer knew it (""
	// when it did not): a reader that kept a base on disk uses it only
	// when it is that one, not a commit of a bucket made anew.
	BaseETag string
	Recent   map[string]IndexEntry
	// Unfolded, in a log commit (FeatureIndexUnfolded), is the entries,
	// with Resume, of sessions whose partitions do not hold them yet: a
	// checkpoint commits its entry here instead of replacing the
	// partition, and the partition takes it later (a fold: the writer's
	// Close, or a writer that finds the set over UnfoldedSize or an
	// entry older than a while). A session's entry is the longer of its
	// partition's and the newest commit's Unfolded one.
	Unfolded map[string]IndexEntry
	// Runs, in a log commit (FeatureIndexUnfolded), are the pages of the
	// bulk writes whose entries the partitions may not hold yet: a
	// session's entry is the longest of its partition's, the Unfolded
	// set's and these pages'. They leave the list when a fold has written
	// them to the partitions.
	Runs []RunPage
	// RunsDelta, in a log commit stored against a base, says that Runs
	// holds, as stored, only the pages the base does not name, and
	// RunsGone the keys of the base's pages it no longer names
	// (FeatureIndexRunDeltas): the list grows with the entries in runs,
	// up to an eighth of the index (a few hundred pages at 100,000
	// sessions), and most commits change a page or two. WithBase makes
	// it whole again.
	RunsDelta bool
	RunsGone  []string
	// Merge, in a log commit, is a merge of runs under way a step at a
	// time (nil: none), which every commit carries on until its runs are
	// gone.
	Merge *RunMerge
	// Fold, in a log commit, is a fold of runs into the partitions under
	// way a step at a time (nil: none), carried on as Merge is.
	Fold *RunFold
	// Unpurged, in a log commit, is the deleted sessions (sorted ids)
	// whose summaries a page of Runs may still hold: a deletion names
	// its sessions here in the commit that says they are deleted, every
	// commit carries them on while a page covers their partitions, and
	// only the commit of a purge that read every such page and rewrote
	// those that held them takes them out. So a deletion cut short at
	// any point after its commit leaves a note the next writer finishes
	// (docs/DESIGN.md §P3, "Deleting sessions"), whatever the age of its
	// tombstone. A panto that predates it ignores it and drops it.
	Unpurged []string
	// Discarded, in a log commit, is the keys of run pages that a purge
	// retired (they held a deleted session's summary), or an agent's
	// exit merged into its run, and that may not be deleted yet: the
	// next writer of a run deletes them beside it and takes them out,
	// and the next purge deletes them before it takes any session out
	// of Unpurged.
	Discarded []string
	Sessions  map[string]IndexEntry
	// Tombstones are the shard's deleted sessions: an id here has no
	// entry in Sessions, and none can be put back.
	Tombstones map[string]Tombstone
}

// NewIndexShard returns an empty shard.
func NewIndexShard(shard string) *IndexShard {
	return &IndexShard{Shard: shard, Sessions: map[string]IndexEntry{}}
}

// Put records e, unless the shard already knows a longer log of the
// session (a checkpoint may lag, never go back). It reports whether the
// shard changed.
func (s *IndexShard) Put(e IndexEntry) bool {
	if _, gone := s.Tombstones[e.Info.ID]; gone {
		return false // a deleted session never comes back
	}
	old, ok := s.Sessions[e.Info.ID]
	if ok && (old.Length > e.Length || old == e) {
		return false
	}
	s.Sessions[e.Info.ID] = e
	return true
}

// Bury records tombstone t: the session's entry goes, and no entry can
// be put back. It reports whether the shard changed.
func (s *IndexShard) Bury(t Tombstone) bool {
	if old, ok := s.Tombstones[t.ID]; ok && !t.Deleted.Before(old.Deleted) {
		_, listed := s.Sessions[t.ID]
		delete(s.Sessions, t.ID)
		return listed
	}
	if s.Tombstones == nil {
		s.Tombstones = map[string]Tombstone{}
	}
	s.Tombstones[t.ID] = t
	delete(s.Sessions, t.ID)
	return true
}

// Apply folds delta, the shard's next delta, into s: what a reader does
// with each delta after the base, and what a fold writes as the next base.
// Its entries are put (never replacing a longer log), its tombstones
// buried (a buried session is never listed again).
func (s *IndexShard) Apply(delta *IndexShard) {
	for _, e := range delta.Sessions {
		s.Put(e)
	}
	for _, t := range delta.Tombstones {
		s.Bury(t)
	}
}

// Clone returns a copy whose maps can be changed independently.
func (s *IndexShard) Clone() *IndexShard {
	c := *s
	c.Sessions = make(map[string]IndexEntry, len(s.Sessions))
	for k, v := range s.Sessions {
		c.Sessions[k] = v
	}
	if s.Tombstones != nil {
		c.Tombstones = make(map[string]Tombstone, len(s.Tombstones))
		for k, v := range s.Tombstones {
			c.Tombstones[k] = v
		}
	}
	if s.Recent != nil {
		c.Recent = maps.Clone(s.Recent)
	}
	if s.Unfolded != nil {
		c.Unfolded = maps.Clone(s.Unfolded)
	}
	c.Runs = slices.Clone(s.Runs)
	c.DirFilter = slices.Clone(s.DirFilter)
	c.Claims = slices.Clone(s.Claims)
	c.Claimed = maps.Clone(s.Claimed)
	c.Unpurged = slices.Clone(s.Unpurged)
	c.Discarded = slices.Clone(s.Discarded)
	if s.Merge != nil {
		m := *s.Merge
		m.From = slices.Clone(m.From)
		c.Merge = &m
	}
	if s.Fold != nil {
		f := *s.Fold
		f.From = slices.Clone(f.From)
		c.Fold = &f
	}
	return &c
}

// Codec turns raw segments and documents into stored objects and back:
// it compresses them (zstd), and in an encrypted prefix seals them too
// (WithSealer). It is the one layer that does either, for every object
// the object store writes but the format marker and its probe. It is
// safe for concurrent use.
//
// Appended segments are compressed at zstd's fastest level: an append (and
// every session of a panto-sync push) pays for it, and it still stores
// about 0.21 of the raw bytes of real transcripts. What stays for long is
// written at the default level: compaction's merged objects (about 0.2)
// and the index shards.
type Codec struct {
	fast, dflt *zstd.Encoder
	dec        *zstd.Decoder
	sealer     Sealer
}

// MaxDecoded bounds what a Codec decompresses, against zstd bombs.
const MaxDecoded = 1 << 30

// NewCodec returns a Codec.
func NewCodec() (*Codec, error) {
	// EncodeAll takes one of the encoder's `concurrency` states and waits
	// when all are busy: with 1, concurrent appends (panto-sync pushes with
	// many workers) compressed one at a time on one core.
	n := runtime.GOMAXPROCS(0)
	fast, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(n), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	dflt, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(n), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxDecoded))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return &Codec{fast: fast, dflt: dflt, dec: dec}, nil
}

// Compress returns raw as one zstd frame, at the fastest level: for
// appended segments.
func (c *Codec) Compress(raw []byte) []byte {
	// Given no buffer, EncodeAll allocates (and zeroes) one of len(raw)
	// below 1 MB, and grows one append by append above: a quarter of the
	// raw size plus a margin holds what it writes for most transcripts.
	return c.fast.EncodeAll(raw, make([]byte, 0, len(raw)/4+1024))
}

// CompressSmaller returns raw as one zstd frame at the default level,
// about 10% smaller than Compress and 1.5x slower: for objects that are
// kept (compaction's merged segments) or small (index shards).
func (c *Codec) CompressSmaller(raw []byte) []byte { return c.dflt.EncodeAll(raw, nil) }

// Decompress returns the bytes of a zstd frame.
func (c *Codec) Decompress(data []byte) ([]byte, error) { return c.dec.DecodeAll(data, nil) }

// EncodeIndexShard returns the stored form of s, in format Version, for
// the object called name (a base or a delta of the shard): compressed,
// and sealed when the codec seals.
func (c *Codec) EncodeIndexShard(name string, s *IndexShard) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	data, err := marshalWire(shardToWire(s))
	if err != nil {
		return nil, fmt.Errorf("encode index shard %s: %w", s.Shard, err)
	}
	if c.sealer != nil {
		if data, err = c.sealShard(name, s, data); err != nil {
			return nil, err
		}
	}
	return c.CompressSmaller(data), nil
}

// DecodeIndexShard parses the stored form of a shard of any version this
// package reads, the object called name, and checks it.
func (c *Codec) DecodeIndexShard(name string, data []byte) (*IndexShard, error) {
	raw, err := c.Decompress(data)
	if err != nil {
		return nil, fmt.Errorf("%w: index shard: %v", ErrInvalid, err)
	}
	if c.sealer != nil {
		return c.openShard(name, raw)
	}
	return decodeShard(raw)
}

// decodeShard parses a shard's document (decompressed, not sealed).
func decodeShard(raw []byte) (*IndexShard, error) {
	version, err := peekVersion(raw, "index shard")
	if err != nil {
		return nil, err
	}
	var s *IndexShard
	if version >= 3 {
		var w wireShard
		if err := unmarshalWire(raw, "index shard", &w); err != nil {
			return nil, err
		}
		s = w.shard()
	} else {
		var l legacyShard
		if err := unmarshalLegacy(raw, "index shard", &l); err != nil {
			return nil, err
		}
		s = l.shard()
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *IndexShard) validate() error {
	if s.Shard == HeadName && (s.Through != 0 || s.Pruned != 0 || s.Purge != 0 || s.Omitted != 0 || s.Base != 0 || s.DirHead || len(s.DirFilter) != 0 || s.DirKeys || s.ClaimsSince != 0 || s.Indexed != 0 || len(s.Recent) != 0 || len(s.Unfolded) != 0 || len(s.Runs) != 0) {
		return fmt.Errorf("%w: index head: a log commit's fields", ErrInvalid)
	}
	if s.Shard != HeadName && (len(s.Claims) != 0 || len(s.Claimed) != 0) {
		return fmt.Errorf("%w: index shard %s: a head's claims", ErrInvalid, s.Shard)
	}
	log := s.Shard == LogName || s.Shard == RunName || s.Shard == HeadName
	if s.Shard == RunName && (s.Through != 0 || len(s.Recent) != 0 || len(s.Unfolded) != 0 || len(s.Runs) != 0 || len(s.Tombstones) != 0) {
		return fmt.Errorf("%w: index run page: a log commit's fields", ErrInvalid)
	}
	if !log && (len(s.Shard) < 1 || len(s.Shard) > 3 || strings.Trim(s.Shard, hexDigits) != "") {
		return fmt.Errorf("%w: index shard name %q", ErrInvalid, s.Shard)
	}
	if s.Base < 0 || s.Base > 0 && s.Base >= s.Through {
		return fmt.Errorf("%w: index log commit %d: base %d", ErrInvalid, s.Through, s.Base)
	}
	if s.Widened < 0 || s.Widened > s.Through || s.Widened > 0 && s.Shard != LogName {
		return fmt.Errorf("%w: index shard %s %d: widened at commit %d", ErrInvalid, s.Shard, s.Through, s.Widened)
	}
	if s.Pruned < 0 || s.Through < s.Pruned || s.Purge < 0 || s.Through < s.Purge || s.Omitted < 0 || s.Indexed < 0 {
		return fmt.Errorf("%w: index shard %s: through %d, pruned %d, purge %d, omitted %d", ErrInvalid, s.Shard, s.Through, s.Pruned, s.Purge, s.Omitted)
	}
	if !log && (s.Omitted != 0 || s.Complete || s.DirHead || len(s.DirFilter) != 0 || s.DirKeys || s.ClaimsSince != 0 || s.Indexed != 0 || s.Base != 0 || len(s.Recent) != 0 || len(s.Unfolded) != 0 || len(s.Runs) != 0) {
		return fmt.Errorf("%w: index shard %s: a partition with a log commit's fields", ErrInvalid, s.Shard)
	}
	filed := func(id string) bool { return log || PartitionOf(id, len(s.Shard)) == s.Shard }
	for id, e := range s.Sessions {
		if err := agent.ValidateSessionID(id); err != nil {
			return fmt.Errorf("%w: index shard %s: %v", ErrInvalid, s.Shard, err)
		}
		if !filed(id) || e.Info.ID != id {
			return fmt.Errorf("%w: index shard %s: misfiled session %q", ErrInvalid, s.Shard, id)
		}
		if e.Length <= 0 || !isSHA256(e.SHA256) {
			return fmt.Errorf("%w: index shard %s: session %s has length %d sha256 %q", ErrInvalid, s.Shard, id, e.Length, e.SHA256)
		}
		if _, gone := s.Tombstones[id]; gone {
			return fmt.Errorf("%w: index shard %s: session %s is both listed and deleted", ErrInvalid, s.Shard, id)
		}
	}
	for id, e := range s.Recent {
		if err := agent.ValidateSessionID(id); err != nil || e.Info.ID != id || e.Length <= 0 || !isSHA256(e.SHA256) {
			return fmt.Errorf("%w: index log commit %d: recent session %q", ErrInvalid, s.Through, id)
		}
	}
	for id, e := range s.Unfolded {
		if err := agent.ValidateSessionID(id); err != nil || e.Info.ID != id || e.Length <= 0 || !isSHA256(e.SHA256) {
			return fmt.Errorf("%w: index log commit %d: unfolded session %q", ErrInvalid, s.Through, id)
		}
		if _, gone := s.Tombstones[id]; gone {
			return fmt.Errorf("%w: index log commit %d: session %s is both unfolded and deleted", ErrInvalid, s.Through, id)
		}
	}
	if (s.RunsDelta || len(s.RunsGone) > 0) && (s.Shard != LogName || s.Base == 0 || !s.RunsDelta) ||
		slices.ContainsFunc(s.RunsGone, func(k string) bool { return !validRunKey(k) }) {
		return fmt.Errorf("%w: index log commit %d: run pages stored against base %d", ErrInvalid, s.Through, s.Base)
	}
	for _, p := range s.Runs {
		if !validRunKey(p.Key) || p.Sessions <= 0 || p.Commit <= 0 || p.Commit > s.Through ||
			!isPartitionName(p.First) || !isPartitionName(p.Last) || ComparePartitions(p.First, p.Last) > 0 {
			return fmt.Errorf("%w: index log commit %d: run page %q", ErrInvalid, s.Through, p.Key)
		}
	}
	if m := s.Merge; m != nil && (!log || m.Into <= 0 || m.Into > s.Through || len(m.From) == 0 ||
		slices.ContainsFunc(m.From, func(k int64) bool { return k <= 0 || k > s.Through }) || !isPartitionName(m.Next)) {
		return fmt.Errorf("%w: index shard %s %d: merge of runs %+v", ErrInvalid, s.Shard, s.Through, *m)
	}
	if f := s.Fold; f != nil && (!log || len(f.From) == 0 ||
		slices.ContainsFunc(f.From, func(k int64) bool { return k <= 0 || k > s.Through }) || !isPartitionName(f.Next)) {
		return fmt.Errorf("%w: index shard %s %d: fold of runs %+v", ErrInvalid, s.Shard, s.Through, *f)
	}
	if (len(s.Unpurged) > 0 || len(s.Discarded) > 0) && s.Shard != LogName {
		return fmt.Errorf("%w: index shard %s: unpurged sessions outside a log commit", ErrInvalid, s.Shard)
	}
	for i, id := range s.Unpurged {
		if err := agent.ValidateSessionID(id); err != nil || i > 0 && s.Unpurged[i-1] >= id {
			return fmt.Errorf("%w: index log commit %d: unpurged session %q", ErrInvalid, s.Through, id)
		}
	}
	for _, k := range s.Discarded {
		if !validRunKey(k) {
			return fmt.Errorf("%w: index log commit %d: discarded run page %q", ErrInvalid, s.Through, k)
		}
	}
	for id, t := range s.Tombstones {
		if err := agent.ValidateSessionID(id); err != nil || !filed(id) || t.ID != id {
			return fmt.Errorf("%w: index shard %s: misfiled tombstone %q", ErrInvalid, s.Shard, id)
		}
	}
	return nil
}

// TrimRecent keeps the RecentSize newest entries of recent (by Modified,
// then id), and reports whether it dropped any.
func TrimRecent(recent map[string]IndexEntry) bool { return TrimNewest(recent, RecentSize) }

// TrimNewest keeps the size newest entries of m (by Modified, then id),
// and reports whether it dropped any.
func TrimNewest(m map[string]IndexEntry, size int) bool {
	recent := m
	if len(recent) <= size {
		return false
	}
	entries := make([]IndexEntry, 0, len(recent))
	for _, e := range recent {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b IndexEntry) int {
		if c := b.Info.Modified.Compare(a.Info.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.Info.ID, b.Info.ID)
	})
	for _, e := range entries[size:] {
		delete(recent, e.Info.ID)
	}
	return true
}

// DeltaRecent returns the entries of recent that base (a whole recent
// view) does not hold as they are: what a commit stores against base.
// ok is false when base and that delta would not make recent again
// (WithBase): then the commit is stored whole.
func DeltaRecent(recent, base map[string]IndexEntry) (delta map[string]IndexEntry, ok bool) {
	delta = map[string]IndexEntry{}
	for id, e := range recent {
		if b, same := base[id]; !same || b != e {
			delta[id] = e
		}
	}
	return delta, maps.Equal(applyRecent(base, delta), recent)
}

// WithBase makes the recent view of c, a commit stored against base
// (c.Base == base.Through, base stored whole), whole (Base stays: it
// says how c is stored): base's, with c's entries
// in place of theirs, trimmed to the RecentSize newest. A session of
// base that c's view no longer holds is older than every session it
// holds (a deletion, which takes one out, is stored whole), so the trim
// drops it again.
func (c *IndexShard) WithBase(base *IndexShard) error {
	if c.Base == 0 {
		return nil
	}
	if base == nil || base.Through != c.Base || base.Base != 0 {
		return fmt.Errorf("%w: index log commit %d is stored against commit %d", ErrInvalid, c.Through, c.Base)
	}
	c.Recent = applyRecent(base.Recent, c.Recent)
	if c.RunsDelta {
		c.Runs = applyRuns(base.Runs, c.RunsGone, c.Runs)
		c.RunsDelta, c.RunsGone = false, nil
	}
	return nil
}

// DeltaRuns returns what a commit whose run pages are runs stores
// against a base that names base: the pages base does not name, and the
// keys of base's it no longer does. ok is false when they would not
// make runs again, in its order (WithBase), or would be no smaller.
func DeltaRuns(runs, base []RunPage) (added []RunPage, gone []string, ok bool) {
	named := map[string]bool{}
	for _, p := range runs {
		named[p.Key] = true
	}
	inBase := map[string]RunPage{}
	for _, p := range base {
		inBase[p.Key] = p
		if !named[p.Key] {
			gone = append(gone, p.Key)
		}
	}
	for _, p := range runs {
		if b, ok := inBase[p.Key]; !ok || b != p {
			added = append(added, p)
		}
	}
	ok = len(added)+len(gone) < len(runs) && slices.Equal(applyRuns(base, gone, added), runs)
	return added, gone, ok
}

// applyRuns is base's pages but those gone names, then added's.
func applyRuns(base []RunPage, gone []string, added []RunPage) []RunPage {
	out := make([]RunPage, 0, len(base)+len(added))
	for _, p := range base {
		if !slices.Contains(gone, p.Key) {
			out = append(out, p)
		}
	}
	return append(out, added...)
}

func applyRecent(base, delta map[string]IndexEntry) map[string]IndexEntry {
	out := make(map[string]IndexEntry, len(base)+len(delta))
	for id, e := range base {
		out[id] = e
	}
	for id, e := range delta {
		out[id] = e
	}
	TrimRecent(out)
	return out
}

// RunKeyPrefix is where the pages of runs are kept, under a prefix.
const RunKeyPrefix = "index/run/"

// validRunKey reports whether key names a run page: RunKeyPrefix, then
// lowercase hex digits and dashes, then ".json.zst".
func validRunKey(key string) bool {
	name, ok := strings.CutPrefix(key, RunKeyPrefix)
	if !ok {
		return false
	}
	name, ok = strings.CutSuffix(name, ".json.zst")
	return ok && name != "" && len(name) <= 64 && strings.Trim(name, hexDigits+"-") == ""
}

// isPartitionName reports whether name is a partition of an index-log
// prefix: two of the shard digits.
func isPartitionName(name string) bool {
	return (len(name) == 2 || len(name) == 3) && strings.Trim(name, hexDigits) == ""
}
