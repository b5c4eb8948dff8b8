package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// This file is the wire format: how each document is spelled, in tagged
// structs of its own, so that a change to an in-memory type (a field
// added to agent.SessionInfo, say) never changes what is stored unless a
// conversion below says so. docs/DESIGN.md ("The bucket format") shows
// each document; TestWireGolden keeps the bytes from changing by accident.
//
// Version 3 documents are decoded leniently (unknown fields are ignored,
// so a 3.x writer may add optional ones); versions 1 and 2, whose
// summaries were the Go layout of agent.SessionInfo, through frozen
// legacy structs, strictly.

// wireSummary is a session's summary, in manifests and index entries.
type wireSummary struct {
	Created         time.Time `json:"created"`
	Modified        time.Time `json:"modified"`
	Messages        int       `json:"messages"`
	LastUserMessage string    `json:"last_user_message,omitempty"`
	APIStyle        string    `json:"api_style,omitempty"`
	BaseURL         string    `json:"base_url,omitempty"`
	Model           string    `json:"model,omitempty"`
	Reasoning       string    `json:"reasoning,omitempty"`
	// Added in 3 (optional: absent in what an older 3 writer wrote).
	Title  string      `json:"title,omitempty"`
	Parent *wireParent `json:"parent,omitempty"`
	Usage  *wireUsage  `json:"usage,omitempty"`
	// Added in 3 with summary version 2 (optional).
	Project *wireProject `json:"project,omitempty"`
}

// wireProject is where a session was started, spelled as its log's
// header spells it.
type wireProject struct {
	Remote string `json:"remote,omitempty"`
	Root   string `json:"root,omitempty"`
	Path   string `json:"path,omitempty"`
	Dir    string `json:"dir,omitempty"`
}

// wireParent is the session a session was copied from, and how many of
// its messages a fork took (absent: all, a keep-both copy).
type wireParent struct {
	ID       string `json:"id"`
	Messages int    `json:"messages,omitempty"`
}

// wireUsage is a session's token totals, spelled as the line format
// spells a message's usage.
type wireUsage struct {
	InputTokens      int64 `json:"input_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
}

func summaryToWire(info agent.SessionInfo) wireSummary {
	w := wireSummary{
		Created:         info.Created.UTC(),
		Modified:        info.Modified.UTC(),
		Messages:        info.MessageCount,
		LastUserMessage: info.LastUserMessage,
		APIStyle:        string(info.APIStyle),
		BaseURL:         info.BaseURL,
		Model:           info.Model,
		Reasoning:       string(info.Reasoning),
		Title:           info.Title,
	}
	if info.Parent != "" || info.ForkedAt != 0 {
		w.Parent = &wireParent{ID: info.Parent, Messages: info.ForkedAt}
	}
	if info.Usage != (agent.Usage{}) {
		u := wireUsage(info.Usage)
		w.Usage = &u
	}
	if info.Project != (agent.Project{}) {
		p := wireProject(info.Project)
		w.Project = &p
	}
	return w
}

func (w wireSummary) info(id string) agent.SessionInfo {
	info := agent.SessionInfo{
		ID:              id,
		Created:         w.Created,
		Modified:        w.Modified,
		MessageCount:    w.Messages,
		LastUserMessage: w.LastUserMessage,
		APIStyle:        agent.APIStyle(w.APIStyle),
		BaseURL:         w.BaseURL,
		Model:           w.Model,
		Reasoning:       agent.ReasoningEffort(w.Reasoning),
		Title:           w.Title,
	}
	if w.Parent != nil {
		info.Parent, info.ForkedAt = w.Parent.ID, w.Parent.Messages
	}
	if w.Usage != nil {
		info.Usage = agent.Usage(*w.Usage)
	}
	if w.Project != nil {
		info.Project = agent.Project(*w.Project)
	}
	return info
}

// wireLog is the line decoder's state after the manifest's Length bytes:
// what the next append needs to go on folding the summary.
type wireLog struct {
	// Lines is the number of lines so far, the header's included.
	Lines int `json:"lines"`
	// Format is the line format version of the log's header.
	Format int `json:"format"`
	// SummaryVersion is manifest.SummaryVersion of the summary (absent:
	// 0, a writer that predates it).
	SummaryVersion int `json:"summary_version,omitempty"`
	wireSummary
}

type wireSegment struct {
	Start        int64  `json:"start"`
	Length       int64  `json:"length"`
	Compressed   int64  `json:"compressed"`
	SHA256       string `json:"sha256"`
	Lines        int    `json:"lines"`
	PrefixSHA256 string `json:"prefix_sha256"`
	Merged       bool   `json:"merged,omitempty"`
}

type wirePending struct {
	Name  string    `json:"name"`
	After time.Time `json:"after"`
}

type wireManifest struct {
	Version   int           `json:"version"`
	ID        string        `json:"id"`
	Length    int64         `json:"length"`
	SHA256    string        `json:"sha256"`
	HashState []byte        `json:"hash_state"`
	Log       *wireLog      `json:"log,omitempty"` // absent for an empty log
	Segments  []wireSegment `json:"segments"`
	Pending   []wirePending `json:"pending_deletes,omitempty"`
}

func manifestToWire(m *Manifest) wireManifest {
	w := wireManifest{
		Version: Version, ID: m.ID, Length: m.Length, SHA256: m.SHA256, HashState: m.HashState,
		Segments: make([]wireSegment, len(m.Segments)),
	}
	if h := m.Decoder.Header; h != nil {
		w.Log = &wireLog{Lines: m.Decoder.Line, Format: h.Version, SummaryVersion: m.SummaryVersion, wireSummary: summaryToWire(m.Decoder.Info)}
	}
	for i, s := range m.Segments {
		w.Segments[i] = wireSegment(s)
	}
	for _, p := range m.Pending {
		w.Pending = append(w.Pending, wirePending{Name: p.Name, After: p.After.UTC()})
	}
	return w
}

func (w *wireManifest) manifest() *Manifest {
	m := &Manifest{ID: w.ID, Length: w.Length, SHA256: w.SHA256, HashState: w.HashState, SummaryVersion: SummaryVersion, Segments: make([]Segment, len(w.Segments))}
	if w.Log != nil {
		m.SummaryVersion = w.Log.SummaryVersion
		info := w.Log.info(w.ID)
		m.Decoder = sessionlog.Decoder{
			Line:   w.Log.Lines,
			Header: &sessionlog.Header{Type: sessionlog.TypeSession, Version: w.Log.Format, ID: w.ID, Created: info.Created},
			Info:   info,
		}
	}
	for i, s := range w.Segments {
		m.Segments[i] = Segment(s)
	}
	for _, p := range w.Pending {
		m.Pending = append(m.Pending, PendingDelete(p))
	}
	return m
}

// wireEntry is one session of an index shard.
type wireEntry struct {
	Length int64  `json:"length"`
	SHA256 string `json:"sha256"`
	wireSummary
	// Added in 3 (optional): what an append needs to go on without
	// reading the session.
	Resume *wireResume `json:"resume,omitempty"`
}

// wireResume is an entry's Resume: the hash state (base64), the
// decoder's state, and the segment counts. An entry of a commit's recent
// view holds the counts and the tail alone (Resume.Where): the others are
// omitted, never zero in a whole one.
type wireResume struct {
	HashState      []byte  `json:"hash_state,omitempty"`
	Lines          int     `json:"lines,omitempty"`
	Format         int     `json:"format,omitempty"`
	SummaryVersion int     `json:"summary_version,omitempty"`
	Segments       int     `json:"segments"`
	Stored         int     `json:"stored,omitempty"`
	Tail           []int64 `json:"tail,omitempty"`
}

func entryToWire(e IndexEntry) wireEntry {
	w := wireEntry{Length: e.Length, SHA256: e.SHA256, wireSummary: summaryToWire(e.Info)}
	if r := e.Resume; r != (Resume{}) {
		w.Resume = &wireResume{HashState: []byte(r.HashState), Lines: r.Lines, Format: r.Format, SummaryVersion: r.SummaryVersion, Segments: r.Segments, Stored: r.Stored, Tail: r.TailOffsets()}
	}
	return w
}

func (w wireEntry) entry(id string) IndexEntry {
	e := IndexEntry{Info: w.info(id), Length: w.Length, SHA256: w.SHA256}
	if r := w.Resume; r != nil {
		e.Resume = Resume{HashState: string(r.HashState), Lines: r.Lines, Format: r.Format, SummaryVersion: r.SummaryVersion, Segments: r.Segments, Stored: r.Stored}
		// A tail that is not one offset per unlisted segment, ascending
		// and inside the log, is dropped: it is only a hint.
		if len(r.Tail) == r.Segments-r.Stored && ascendingWithin(r.Tail, w.Length) {
			e.Resume.Tail = JoinOffsets(r.Tail)
		}
	}
	return e
}

type wireShard struct {
	Version     int                      `json:"version"`
	Shard       string                   `json:"shard"`
	Through     int64                    `json:"through,omitempty"`
	Pruned      int64                    `json:"pruned,omitempty"`
	Purge       int64                    `json:"purge,omitempty"`
	Written     time.Time                `json:"written,omitzero"`
	Omitted     int64                    `json:"omitted,omitempty"`
	Complete    bool                     `json:"complete,omitempty"`
	DirHead     bool                     `json:"dir_head,omitempty"`
	DirFilter   []byte                   `json:"dir_filter_v2,omitempty"`
	DirKeys     bool                     `json:"dir_keys,omitempty"`
	ClaimsSince int64                    `json:"claims_since,omitempty"`
	Claims      []string                 `json:"claims,omitempty"`
	Claimed     map[string]int64         `json:"claimed,omitempty"`
	Indexed     int64                    `json:"indexed,omitempty"`
	Widened     int64                    `json:"widened,omitempty"`
	Base        int64                    `json:"base,omitempty"`
	BaseETag    string                   `json:"base_etag,omitempty"`
	Recent      map[string]wireEntry     `json:"recent,omitempty"`
	Unfolded    map[string]wireEntry     `json:"unfolded,omitempty"`
	Runs        []wireRunPage            `json:"runs,omitempty"`
	RunsDelta   bool                     `json:"runs_delta,omitempty"`
	RunsGone    []string                 `json:"runs_gone,omitempty"`
	Merge       *wireRunMerge            `json:"merge,omitempty"`
	Fold        *wireRunFold             `json:"fold,omitempty"`
	Unpurged    []string                 `json:"unpurged,omitempty"`
	Discarded   []string                 `json:"discarded,omitempty"`
	Sessions    map[string]wireEntry     `json:"sessions"`
	Tombstones  map[string]wireTombstone `json:"tombstones,omitempty"`
}

// wireRunPage is a page of a run, in a log commit: its object, the
// partitions it covers, how many entries it holds, and the commit that
// wrote it. The same in a sealed commit's skeleton: it names no session.
type wireRunPage struct {
	Key      string `json:"key"`
	First    string `json:"first"`
	Last     string `json:"last"`
	Sessions int    `json:"sessions"`
	Commit   int64  `json:"commit"`
}

// wireRunMerge is a merge of runs under way, in a log commit. A panto
// that predates it ignores it and drops it from its commits: the run
// merged into and what is left of the runs merged are then runs like
// any other, each entry still in one of them.
type wireRunMerge struct {
	Into int64   `json:"into"`
	From []int64 `json:"from"`
	Next string  `json:"next"`
}

func mergeToWire(m *RunMerge) *wireRunMerge {
	if m == nil {
		return nil
	}
	return &wireRunMerge{Into: m.Into, From: m.From, Next: m.Next}
}

func mergeFromWire(w *wireRunMerge) *RunMerge {
	if w == nil {
		return nil
	}
	return &RunMerge{Into: w.Into, From: w.From, Next: w.Next}
}

// wireRunFold is a fold of runs under way, in a log commit; a panto
// that predates it drops it as it drops a merge (wireRunMerge).
type wireRunFold struct {
	From []int64 `json:"from"`
	Next string  `json:"next"`
}

func foldToWire(f *RunFold) *wireRunFold {
	if f == nil {
		return nil
	}
	return &wireRunFold{From: f.From, Next: f.Next}
}

func foldFromWire(w *wireRunFold) *RunFold {
	if w == nil {
		return nil
	}
	return &RunFold{From: w.From, Next: w.Next}
}

func runsToWire(pages []RunPage) []wireRunPage {
	var w []wireRunPage
	for _, p := range pages {
		w = append(w, wireRunPage{Key: p.Key, First: p.First, Last: p.Last, Sessions: p.Sessions, Commit: p.Commit})
	}
	return w
}

func runsFromWire(w []wireRunPage) []RunPage {
	var pages []RunPage
	for _, p := range w {
		pages = append(pages, RunPage{Key: p.Key, First: p.First, Last: p.Last, Sessions: p.Sessions, Commit: p.Commit})
	}
	return pages
}

// wireTombstone is a deleted session, in a shard: when, and the length
// and hash of its log then (no content).
type wireTombstone struct {
	Deleted time.Time `json:"deleted"`
	Length  int64     `json:"length"`
	SHA256  string    `json:"sha256,omitempty"`
}

func shardToWire(s *IndexShard) wireShard {
	w := wireShard{Version: Version, Shard: s.Shard, Through: s.Through, Pruned: s.Pruned, Purge: s.Purge, Omitted: s.Omitted, Complete: s.Complete, DirHead: s.DirHead, DirFilter: s.DirFilter, DirKeys: s.DirKeys, ClaimsSince: s.ClaimsSince, Claims: s.Claims, Claimed: s.Claimed, Indexed: s.Indexed, Widened: s.Widened, Base: s.Base, BaseETag: s.BaseETag, Runs: runsToWire(s.Runs), RunsDelta: s.RunsDelta, RunsGone: s.RunsGone, Merge: mergeToWire(s.Merge), Fold: foldToWire(s.Fold), Unpurged: s.Unpurged, Discarded: s.Discarded, Sessions: make(map[string]wireEntry, len(s.Sessions))}
	if !s.Written.IsZero() {
		w.Written = s.Written.UTC()
	}
	for id, e := range s.Recent {
		if w.Recent == nil {
			w.Recent = map[string]wireEntry{}
		}
		w.Recent[id] = entryToWire(e)
	}
	for id, e := range s.Unfolded {
		if w.Unfolded == nil {
			w.Unfolded = map[string]wireEntry{}
		}
		w.Unfolded[id] = entryToWire(e)
	}
	for id, e := range s.Sessions {
		w.Sessions[id] = entryToWire(e)
	}
	for id, t := range s.Tombstones {
		if w.Tombstones == nil {
			w.Tombstones = map[string]wireTombstone{}
		}
		w.Tombstones[id] = wireTombstone{Deleted: t.Deleted.UTC(), Length: t.Length, SHA256: t.SHA256}
	}
	return w
}

func (w *wireShard) shard() *IndexShard {
	s := &IndexShard{Shard: w.Shard, Through: w.Through, Pruned: w.Pruned, Purge: w.Purge, Written: w.Written, Omitted: w.Omitted, Complete: w.Complete, DirHead: w.DirHead, DirFilter: w.DirFilter, DirKeys: w.DirKeys, ClaimsSince: w.ClaimsSince, Claims: w.Claims, Claimed: w.Claimed, Indexed: w.Indexed, Widened: w.Widened, Base: w.Base, BaseETag: w.BaseETag, Runs: runsFromWire(w.Runs), RunsDelta: w.RunsDelta, RunsGone: w.RunsGone, Merge: mergeFromWire(w.Merge), Fold: foldFromWire(w.Fold), Unpurged: w.Unpurged, Discarded: w.Discarded, Sessions: make(map[string]IndexEntry, len(w.Sessions))}
	if len(s.Claims) == 0 {
		s.Claims = nil // as an encoding of it reads back
	}
	if len(s.Claimed) == 0 {
		s.Claimed = nil
	}
	for id, e := range w.Recent {
		if s.Recent == nil {
			s.Recent = map[string]IndexEntry{}
		}
		s.Recent[id] = e.entry(id)
	}
	for id, e := range w.Unfolded {
		if s.Unfolded == nil {
			s.Unfolded = map[string]IndexEntry{}
		}
		s.Unfolded[id] = e.entry(id)
	}
	for id, e := range w.Sessions {
		s.Sessions[id] = e.entry(id)
	}
	for id, t := range w.Tombstones {
		if s.Tombstones == nil {
			s.Tombstones = map[string]Tombstone{}
		}
		s.Tombstones[id] = Tombstone{ID: id, Deleted: t.Deleted, Length: t.Length, SHA256: t.SHA256}
	}
	return s
}

// The legacy layouts: versions 1 and 2, as main wrote them until format
// 3. Frozen: nothing here may change, or buckets written then stop
// loading (TestV2Bucket in store/objstore reads one).

// legacyInfo is agent.SessionInfo as encoding/json spelled it untagged.
type legacyInfo struct {
	ID              string
	Created         time.Time
	Modified        time.Time
	MessageCount    int
	LastUserMessage string
	APIStyle        string
	BaseURL         string
	Model           string
	Reasoning       string
}

func (l legacyInfo) info() agent.SessionInfo {
	return agent.SessionInfo{
		ID: l.ID, Created: l.Created, Modified: l.Modified, MessageCount: l.MessageCount, LastUserMessage: l.LastUserMessage,
		APIStyle: agent.APIStyle(l.APIStyle), BaseURL: l.BaseURL, Model: l.Model, Reasoning: agent.ReasoningEffort(l.Reasoning),
	}
}

type legacyHeader struct {
	Type    string    `json:"type"`
	Version int       `json:"version"`
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	More    int       `json:"more,omitempty"`
}

type legacyDecoder struct {
	Line   int           `json:"line"`
	Header *legacyHeader `json:"header,omitempty"`
	Info   legacyInfo    `json:"info"`
}

type legacyManifest struct {
	Version   int           `json:"version"`
	ID        string        `json:"id"`
	Length    int64         `json:"length"`
	SHA256    string        `json:"sha256"`
	HashState []byte        `json:"hash_state"`
	Decoder   legacyDecoder `json:"decoder"`
	Segments  []wireSegment `json:"segments"`
	Pending   []wirePending `json:"pending_deletes,omitempty"`
}

func (l *legacyManifest) manifest() *Manifest {
	m := &Manifest{ID: l.ID, Length: l.Length, SHA256: l.SHA256, HashState: l.HashState, Segments: make([]Segment, len(l.Segments))}
	m.Decoder = sessionlog.Decoder{Line: l.Decoder.Line, Info: l.Decoder.Info.info()}
	if h := l.Decoder.Header; h != nil {
		m.Decoder.Header = &sessionlog.Header{Type: h.Type, Version: h.Version, ID: h.ID, Created: h.Created}
	}
	for i, s := range l.Segments {
		m.Segments[i] = Segment(s)
	}
	for _, p := range l.Pending {
		m.Pending = append(m.Pending, PendingDelete(p))
	}
	return m
}

type legacyEntry struct {
	Info   legacyInfo `json:"info"`
	Length int64      `json:"length"`
	SHA256 string     `json:"sha256"`
}

type legacyShard struct {
	Version  int                    `json:"version"`
	Shard    string                 `json:"shard"`
	Through  int64                  `json:"through,omitempty"`
	Pruned   int64                  `json:"pruned,omitempty"`
	Written  time.Time              `json:"written,omitzero"`
	Sessions map[string]legacyEntry `json:"sessions"`
}

func (l *legacyShard) shard() *IndexShard {
	s := &IndexShard{Shard: l.Shard, Through: l.Through, Pruned: l.Pruned, Written: l.Written, Sessions: make(map[string]IndexEntry, len(l.Sessions))}
	for id, e := range l.Sessions {
		s.Sessions[id] = IndexEntry{Info: e.Info.info(), Length: e.Length, SHA256: e.SHA256}
	}
	return s
}

// peekVersion reads a document's version before anything else of it, and
// refuses one newer than this package reads, and a sealed one (an
// encrypted prefix's, which only a Codec with its key reads).
func peekVersion(data []byte, what string) (int, error) {
	var head struct {
		Version int             `json:"version"`
		Sealed  json.RawMessage `json:"sealed"`
	}
	if v, ok := leadingVersion(data); ok {
		// A key is never inside a string: there a quote is escaped.
		head.Version = v
		if bytes.Contains(data, []byte(`"sealed":`)) {
			head.Sealed = json.RawMessage(`""`)
		}
	} else if err := json.Unmarshal(data, &head); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	if head.Version > Version {
		return 0, fmt.Errorf("%s version %d: %w (this panto reads up to %d): upgrade panto", what, head.Version, ErrNewerVersion, Version)
	}
	if head.Version < 1 {
		return 0, fmt.Errorf("%w: %s: no format version", ErrInvalid, what)
	}
	if head.Sealed != nil {
		return 0, fmt.Errorf("%w: %s: %w: it is an encrypted prefix's, read without its key", ErrInvalid, what, ErrSealed)
	}
	return head.Version, nil
}

// leadingVersion reads the version of a document whose first key is
// "version", as this package writes every one: a reader need not scan a
// whole document to find it (for a catalog of 100,000 sessions, a
// quarter of its decoding). ok is false for any other spelling, which
// the full parse then reads.
func leadingVersion(data []byte) (v int, ok bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"version":`))
	if !ok {
		return 0, false
	}
	i := 0
	for ; i < len(rest) && i < 6 && rest[i] >= '0' && rest[i] <= '9'; i++ {
		v = v*10 + int(rest[i]-'0')
	}
	if i == 0 || i == len(rest) || rest[i] != ',' && rest[i] != '}' {
		return 0, false
	}
	return v, true
}

// unmarshalWire decodes a version 3 document, ignoring fields it does not
// know; trailing data is an error.
func unmarshalWire(data []byte, what string, v any) error {
	// Unmarshal, not a Decoder: it refuses trailing data itself, and
	// decodes from data in place instead of copying it into a buffer.
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	return nil
}

// unmarshalLegacy decodes a version 1 or 2 document strictly: its layout
// is frozen, so an unknown field means it is not one.
func unmarshalLegacy(data []byte, what string, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: %s: trailing data", ErrInvalid, what)
	}
	return nil
}

// marshalWire encodes a wire struct: struct fields in order, map keys
// sorted, so the same document always has the same bytes.
func marshalWire(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// ascendingWithin reports whether offs are strictly ascending offsets
// inside a log of length bytes.
func ascendingWithin(offs []int64, length int64) bool {
	for i, o := range offs {
		if o < 0 || o >= length || i > 0 && o <= offs[i-1] {
			return false
		}
	}
	return true
}
