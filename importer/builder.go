package importer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// MetadataImport is the metadata key of a message the import wrote
// itself: results of calls the source left without one.
const MetadataImport = "panto.import"

// builder folds a foreign log's messages into batches of panto lines,
// holding what is not complete yet (see the package doc). It looks at no
// line after the one it is given, so the batches written for a prefix of
// a log are a prefix of the batches written for all of it.
type builder struct {
	agent Agent
	// header is filled by the converter as it reads; it is written with
	// the first batch, once it has an id and a time, and fixed from then.
	header  sessionlog.Header
	foreign string
	// remote is the work tree's origin remote, normalised, when the log
	// records it (Codex's session_meta.git.repository_url).
	remote string
	// fallbackID is the foreign id when no record names one: the file's.
	fallbackID string
	// exportOf is the panto session the log was exported from, when it
	// was (Conversion.ExportOf).
	exportOf string
	started  bool
	// queued are entries read before the header could be written.
	queued []sessionlog.Entry
	lastTS time.Time

	out      bytes.Buffer
	messages int
	stats    Stats
	title    string

	// pending is an assistant message still receiving blocks; awaiting
	// one whose calls wait for their results.
	pending, awaiting *turn
	// usedResponses are the response ids whose usage was counted.
	usedResponses map[string]bool
	err           error
}

type turn struct {
	entry    sessionlog.Entry
	response string
	calls    []string
	results  map[string]agent.Block
}

func newBuilder(a Agent) *builder {
	return &builder{agent: a, usedResponses: map[string]bool{}}
}

// setID names the foreign session (id) and derives the panto id; only
// the first call before the first batch counts.
func (b *builder) setID(a Agent, foreignID string) {
	if b.started || b.foreign != "" || foreignID == "" {
		return
	}
	b.foreign = foreignID
	b.header.ID = SessionID(a, foreignID)
}

// setCreated sets the session's start; only the first call counts.
func (b *builder) setCreated(t time.Time) {
	if !b.started && b.header.Created.IsZero() && !t.IsZero() {
		b.header.Created = t
	}
}

// origin returns the header's origin, made on first use.
func (b *builder) origin() *sessionlog.Origin {
	if b.header.Origin == nil {
		b.header.Origin = &sessionlog.Origin{Agent: string(b.agent)}
	}
	return b.header.Origin
}

// seen records the time of a line read.
func (b *builder) seen(t time.Time) {
	if !t.IsZero() {
		b.lastTS = t
		b.setCreated(t)
	}
}

// user adds a message that is not an assistant's: it closes the turn
// before it.
func (b *builder) user(e sessionlog.Entry) {
	b.closeAll()
	b.emit(e)
}

// title sets the session's title, when it changes.
func (b *builder) setTitle(title string) {
	if title == "" || title == b.title {
		return
	}
	b.title = title
	b.emit(sessionlog.Entry{Message: agent.TitleMessage(title)})
}

// assistant adds blocks of an assistant response. Blocks of the same
// response (response, when the agent names its responses) join the
// message in progress; usage, when not nil, replaces the response's;
// stop, when not empty, ends the message.
func (b *builder) assistant(response string, ts time.Time, blocks []agent.Block, usage *agent.Usage, ident agent.WireIdentity, stop agent.StopReason) {
	if b.pending != nil && (response == "" || b.pending.response != response) {
		b.closePending()
	}
	if b.pending == nil {
		b.closeAwaiting()
		b.pending = &turn{response: response, entry: sessionlog.Entry{TS: ts, Message: agent.Message{Role: agent.RoleAssistant}}}
	}
	p := b.pending
	p.entry.Message.Content = append(p.entry.Message.Content, blocks...)
	if usage != nil && (response == "" || !b.usedResponses[response]) {
		u := *usage
		p.entry.Message.Usage = &u
	}
	if ident.Model != "" {
		p.entry.Identity = ident
	}
	if stop != "" {
		p.entry.Message.StopReason = stop
		b.closePending()
	}
}

// addUsage adds u to the message in progress (Codex reports usage after
// a response's items); it reports false when there is none.
func (b *builder) addUsage(u agent.Usage) bool {
	if b.pending == nil {
		return false
	}
	if b.pending.entry.Message.Usage == nil {
		b.pending.entry.Message.Usage = &agent.Usage{}
	}
	b.pending.entry.Message.Usage.Add(u)
	return true
}

// closePending ends the assistant message in progress: written when it
// calls no tools, else held for its results. One with nothing a
// provider would take back (no block) is dropped.
func (b *builder) closePending() {
	p := b.pending
	if p == nil {
		return
	}
	b.pending = nil
	if p.response != "" && p.entry.Message.Usage != nil {
		b.usedResponses[p.response] = true
	}
	if len(p.entry.Message.Content) == 0 {
		return
	}
	// A call without an id, or with one a call before it has, cannot
	// be answered: it is dropped.
	kept := p.entry.Message.Content[:0:0]
	for _, bl := range p.entry.Message.Content {
		if bl.Type == agent.BlockToolUse {
			bl.ToolUseID = WireToolID(bl.ToolUseID)
			if bl.ToolUseID == "" || contains(p.calls, bl.ToolUseID) {
				continue
			}
			p.calls = append(p.calls, bl.ToolUseID)
		}
		kept = append(kept, bl)
	}
	p.entry.Message.Content = kept
	if len(kept) == 0 {
		return
	}
	if len(p.calls) == 0 {
		b.emit(p.entry)
		return
	}
	p.results = map[string]agent.Block{}
	b.awaiting = p
}

// toolResult adds the result of call id; a result closes the assistant
// message in progress. A result that answers no open call is dropped.
func (b *builder) toolResult(id, text string, isError bool) {
	b.closePending()
	id = WireToolID(id)
	a := b.awaiting
	if a == nil || !contains(a.calls, id) {
		b.stats.DroppedResults++
		return
	}
	if _, dup := a.results[id]; dup {
		b.stats.DroppedResults++
		return
	}
	a.results[id] = agent.ToolResultBlock(id, text, isError)
	if len(a.results) == len(a.calls) {
		b.flushAwaiting(b.resultsEntry())
	}
}

// closeAwaiting writes the held assistant message with the results it
// has, closing the calls that have none: the source moved on without
// them.
func (b *builder) closeAwaiting() {
	if b.awaiting == nil {
		return
	}
	closed := 0
	for _, id := range b.awaiting.calls {
		if _, ok := b.awaiting.results[id]; !ok {
			b.awaiting.results[id] = agent.ToolResultBlock(id, fmt.Sprintf("no result: the %s log has none for this call (it was interrupted)", b.agent), true)
			closed++
		}
	}
	b.stats.ClosedCalls += closed
	results := b.resultsEntry()
	if closed > 0 {
		results.Message.Metadata = map[string]any{MetadataImport: fmt.Sprintf("closed %d of %d calls the source left without a result", closed, len(b.awaiting.calls))}
	}
	b.flushAwaiting(results)
}

func (b *builder) resultsEntry() sessionlog.Entry {
	return sessionlog.Entry{TS: b.lastTS, Message: agent.Message{Role: agent.RoleUser}}
}

func (b *builder) flushAwaiting(results sessionlog.Entry) {
	a := b.awaiting
	b.awaiting = nil
	for _, id := range a.calls {
		results.Message.Content = append(results.Message.Content, a.results[id])
	}
	b.stats.ToolCalls += len(a.calls)
	b.stats.ToolResults += len(a.calls)
	b.emit(a.entry, results)
}

// closeAll ends every message in progress.
func (b *builder) closeAll() {
	b.closePending()
	b.closeAwaiting()
}

// emit writes entries as one batch, with the header when it is the
// first; until the header has an id and a time, entries wait.
func (b *builder) emit(entries ...sessionlog.Entry) {
	if b.err != nil {
		return
	}
	for i := range entries {
		if entries[i].TS.IsZero() {
			entries[i].TS = b.lastTS
		}
	}
	if !b.started {
		b.queued = append(b.queued, entries...)
		if b.header.ID == "" && b.fallbackID != "" {
			b.setID(b.agent, b.fallbackID)
			if o := b.origin(); o.SessionID == "" {
				o.SessionID = b.fallbackID
			}
		}
		if b.header.ID == "" || b.header.Created.IsZero() {
			return
		}
		entries, b.queued = b.queued, nil
		for i := range entries {
			if entries[i].TS.IsZero() {
				entries[i].TS = b.header.Created
			}
		}
		b.started = true
		// The project is what the log says of where the agent ran: its
		// directory, and the work tree's remote when the agent recorded
		// it (Codex does), so that the session is its project's on every
		// machine and at every path. A conversion is a function of the
		// log alone; what the importing machine's disk says of the
		// directory is cmd/panto's to add (Conversion.WithProject).
		if o := b.header.Origin; o != nil && (o.CWD != "" || b.remote != "") {
			b.header.Project = agent.Project{Remote: b.remote, Dir: o.CWD}
		}
		data, err := sessionlog.EncodeEntries(&b.header, entries)
		b.write(data, err, len(entries))
		return
	}
	data, err := sessionlog.EncodeEntries(nil, entries)
	b.write(data, err, len(entries))
}

func (b *builder) write(data []byte, err error, n int) {
	if err != nil {
		b.err = err
		return
	}
	b.out.Write(data)
	b.messages += n
}

// result is what was written; what is held stays out.
func (b *builder) result(a Agent) *Conversion {
	st := b.stats
	st.Held = b.pending != nil || b.awaiting != nil || len(b.queued) > 0
	for _, t := range []*turn{b.pending, b.awaiting} {
		if t == nil {
			continue
		}
		st.HeldCalls += len(t.entry.Message.ToolUses())
		if u := t.entry.Message.Usage; u != nil && !(t == b.pending && t.response != "" && b.usedResponses[t.response]) {
			st.HeldUsage.Add(*u)
		}
	}
	if !b.started {
		return &Conversion{Agent: a, ForeignID: b.foreign, ID: b.header.ID, Stats: st, ExportOf: b.exportOf}
	}
	c := &Conversion{Agent: a, ForeignID: b.foreign, ID: b.header.ID, Log: b.out.Bytes(), Messages: b.messages, Stats: st, Project: b.header.Project}
	if b.exportOf != "" && b.messages <= b.header.ForkedAt {
		c.ExportOf = b.exportOf
	}
	if b.remote != "" {
		// A panto that did not take the remote from the log wrote the
		// directory alone; a session it imported grows from that.
		var before agent.Project
		if o := b.header.Origin; o != nil && o.CWD != "" {
			before = agent.Project{Dir: o.CWD}
		}
		if log, err := withHeaderProject(c.Log, before); err == nil {
			c.others = append(c.others, log)
		}
	}
	return c
}

// WireToolID is a tool call's id as every wire takes it back: Anthropic
// wants letters, digits, _ and - alone, OpenAI at most 40 of them. Any
// other id (pi's "call_…|fc_…" of the OpenAI Responses API, hundreds of
// characters with + / =) becomes one derived from it, the same in the
// call and in its result; "" stays "".
func WireToolID(id string) string {
	valid := len(id) <= 40
	for i := 0; valid && i < len(id); i++ {
		c := id[i]
		valid = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	if valid {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "call_" + hex.EncodeToString(sum[:12])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// asString decodes raw when it is a JSON string (ok false for any other
// value, or a malformed string). A field that is a string or an array
// of blocks is so read as json.Unmarshal into a string would read it,
// without the scan of the whole value that a failed Unmarshal into a
// string makes first: a tool result of megabytes was scanned once more
// for nothing.
func asString(raw []byte) (string, bool) {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	var s string
	return s, json.Unmarshal(t, &s) == nil
}
