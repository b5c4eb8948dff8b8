package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Sync commands.
const (
	cmdPush   = "push"
	cmdPull   = "pull"
	cmdStatus = "status"
)

// syncer runs push, pull or status over a catalog and a bucket: it plans
// every selected session (Plan), then carries the plans out concurrently,
// each session on its own, so that one failure or divergence does not
// stop the others.
type syncer struct {
	cmd       string
	o         *options
	local     LocalCatalog
	remote    RemoteCatalog
	rep       *reporter
	statePath string

	mu    sync.Mutex // guards state
	state *State
}

// job is one session's plan and what carrying it out needs.
type job struct {
	id     string
	path   string
	st     *SessionState // the local side as scanned
	local  Side
	remote Side
	action Action
	// from and data: remote[from:R], when planning had to read it to
	// compare an overlap that does not end at a segment boundary.
	from int64
	data []byte
	// bytes is what the command transfers for this session.
	bytes int64
	// lagging: the remote index is behind what the bucket holds (see
	// indexLags).
	lagging bool
	// deferred: a push of a session the remote lacks, whose local side is
	// scanned when it is pushed (see deferScan); until then local.Length
	// is the file's size and st is nil.
	deferred bool
	err      error
}

func newSyncer(cmd string, o *options, local LocalCatalog, remote RemoteCatalog) *syncer {
	key := remoteKey(o.Remote, o.Endpoint)
	path := statePath(o.Dir, key)
	return &syncer{cmd: cmd, o: o, local: local, remote: remote, rep: newReporter(o), statePath: path, state: LoadState(path, key)}
}

// run syncs every selected session and returns the exit code: 1 if any
// session failed, else 3 if any diverged (and was not kept), else 0.
func (s *syncer) run(ctx context.Context) (int, error) {
	start := time.Now()
	localIDs, err := s.local.IDs(ctx)
	if err != nil {
		return 1, fmt.Errorf("list sessions in %s: %w", s.o.Dir, err)
	}
	remote, err := s.remote.Sessions(ctx)
	if err != nil {
		return 1, fmt.Errorf("list sessions in %s: %w", s.o.Remote, err)
	}
	seen := map[string]bool{}
	var ids []string
	for _, id := range localIDs {
		if !seen[id] && s.o.selected(id) {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for id := range remote {
		if !seen[id] && s.o.selected(id) {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)

	jobs := make([]*job, len(ids))
	parallel(ctx, s.o.Concurrency, len(ids), func(i int) { jobs[i] = s.plan(ctx, ids[i], remote) })

	var total int64
	for _, j := range jobs {
		if j != nil && j.err == nil {
			total += j.bytes
		}
	}
	if s.o.Progress && s.cmd != cmdStatus && !s.o.DryRun && total > 0 {
		s.rep.startProgress(len(jobs), total)
	}
	events := make([]Event, len(jobs))
	parallel(ctx, s.o.Concurrency, len(jobs), func(i int) {
		if jobs[i] == nil {
			return
		}
		events[i] = s.execute(ctx, jobs[i])
		s.rep.event(events[i])
		s.rep.progress(jobs[i].bytes)
	})
	s.rep.stopProgress()

	sum := Summary{Command: s.cmd, DryRun: s.o.DryRun, Sessions: len(ids), Counts: map[string]int{}}
	if !s.o.DryRun && s.cmd != cmdStatus {
		// The segments are committed; the bucket's index learns of them
		// here. A failure leaves it behind, which the next push repairs.
		if err := s.remote.Flush(context.WithoutCancel(ctx)); err != nil {
			sum.Failed++
			fmt.Fprintf(s.o.Stderr, "panto-sync: %s: the data is pushed but the bucket's index lags; re-run to repair it\n", oneLine(err.Error()))
		}
	}
	for i, e := range events {
		if e.Event == "" { // never run: interrupted
			e = Event{Event: "failed", ID: ids[i], Error: "interrupted", Text: fmt.Sprintf("failed    %s: interrupted before it was synced; re-run", ids[i])}
			s.rep.event(e)
		}
		sum.Counts[e.Event]++
		switch e.Event {
		case "failed", "refused":
			sum.Failed++
		case "diverged", "would-diverge":
			sum.Diverged++
		}
		if e.Error == "" {
			sum.Bytes += e.Bytes
		}
	}
	if !s.o.DryRun {
		s.pruneState(localIDs, remote)
		if _, err := os.Stat(s.o.Dir); err == nil {
			if err := s.state.Save(s.statePath); err != nil {
				sum.Failed++
				fmt.Fprintf(s.o.Stderr, "panto-sync: %v\n", err)
			}
		}
	}
	switch {
	case sum.Failed > 0:
		sum.ExitCode = 1
	case sum.Diverged > 0:
		sum.ExitCode = 3
	}
	sum.Seconds = time.Since(start).Seconds()
	sum.Text = s.summaryText(sum)
	s.rep.summary(sum)
	return sum.ExitCode, nil
}

func (s *syncer) summaryText(sum Summary) string {
	verb := map[string]string{cmdPush: "pushed", cmdPull: "pulled", cmdStatus: "to transfer"}[s.cmd]
	if s.o.DryRun && s.cmd != cmdStatus {
		verb = "would " + s.cmd
	}
	moved := sum.Counts["pushed"] + sum.Counts["pulled"] + sum.Counts["would-push"] + sum.Counts["would-pull"]
	if s.cmd == cmdStatus {
		moved = sum.Counts["status"]
	}
	text := fmt.Sprintf("%s: %d sessions, %d %s (%s), %d unchanged", s.cmd, sum.Sessions, moved, verb, humanBytes(sum.Bytes), sum.Counts["unchanged"])
	if n := sum.Counts["skipped"]; n > 0 {
		text += fmt.Sprintf(", %d skipped", n)
	}
	if n := sum.Counts["kept-both"] + sum.Counts["would-keep-both"]; n > 0 {
		text += fmt.Sprintf(", %d kept both", n)
	}
	text += fmt.Sprintf(", %d diverged, %d failed in %.2fs", sum.Diverged, sum.Failed, sum.Seconds)
	switch sum.ExitCode {
	case 1:
		text += "; fix the failures above and re-run"
	case 3:
		text += "; see the divergences above (--on-diverge=keep-both keeps both copies)"
	}
	return text
}

// pruneState forgets sessions that are on neither side any more.
func (s *syncer) pruneState(localIDs []string, remote map[string]RemoteSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	local := map[string]bool{}
	for _, id := range localIDs {
		local[id] = true
	}
	for id := range s.state.Sessions {
		if _, ok := remote[id]; !ok && !local[id] {
			delete(s.state.Sessions, id)
		}
	}
}

func (s *syncer) prevState(id string) *SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Sessions[id]
}

func (s *syncer) setState(id string, st *SessionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Sessions[id] = st
}

// plan scans the local side of id and decides what to do.
func (s *syncer) plan(ctx context.Context, id string, remote map[string]RemoteSession) *job {
	j := &job{id: id}
	if err := agent.ValidateSessionID(id); err != nil {
		j.err = fmt.Errorf("refused: %w: it could escape %s", err, s.o.Dir)
		return j
	}
	path, err := s.local.Path(id)
	if err != nil {
		j.err = err
		return j
	}
	j.path = path
	if s.deferScan(j, remote) {
		return j
	}
	if j.st, err = scanLocal(id, path, s.prevState(id), s.o.DryRun); err != nil {
		j.err = err
		return j
	}
	j.local = Side{Exists: j.st.Committed > 0, Length: j.st.Committed, SHA256: j.st.SHA256}
	if rs, ok := remote[id]; ok {
		j.remote = Side{Exists: true, Length: rs.Length, SHA256: rs.SHA256}
	}
	if !j.local.Exists && !j.remote.Exists { // a file with no committed line yet
		j.action = ActionSame
		return j
	}
	if s.indexLags(ctx, j) {
		j.action, j.lagging = ActionSame, true
		return j
	}
	j.action, j.err = Plan(j.local, j.remote, func() (bool, error) { return s.isPrefix(ctx, j) })
	j.bytes = s.transferBytes(j)
	return j
}

// deferScan plans a push of a session that the remote index lacks and
// that was never synced with it, from the file's size alone: whatever its
// committed bytes, push uploads them all (ActionPushNew). The file is
// then scanned when it is pushed, and the scan's buffer is what is sent,
// so that a full push reads each file once, not once to plan and again to
// push. It reports whether it planned j.
func (s *syncer) deferScan(j *job, remote map[string]RemoteSession) bool {
	if s.cmd != cmdPush || s.o.DryRun {
		return false
	}
	if _, ok := remote[j.id]; ok {
		return false
	}
	prev := s.prevState(j.id)
	if prev != nil && prev.SyncedLength > 0 {
		return false // indexLags may apply
	}
	fi, err := os.Stat(j.path)
	if err != nil || fi.Size() == 0 {
		return false
	}
	if prev != nil && prev.Size == fi.Size() && prev.MtimeNS == fi.ModTime().UnixNano() {
		return false // the state has it: no read to save
	}
	j.deferred = true
	j.local = Side{Exists: true, Length: fi.Size()}
	j.action = ActionPushNew
	j.bytes = fi.Size()
	return true
}

// scanDeferred scans the file of a deferred job in full and plans it for
// real. It returns the committed bytes read (a buffer of fileBuffers), or
// nil when there is nothing to push.
func (s *syncer) scanDeferred(j *job) ([]byte, error) {
	j.deferred = false
	fresh := &SessionState{Size: -1} // read it all, from the top
	if prev := s.prevState(j.id); prev != nil {
		fresh.SyncedLength, fresh.SyncedSHA256, fresh.Forks = prev.SyncedLength, prev.SyncedSHA256, prev.Forks
	}
	st, data, _, err := scanFile(j.id, j.path, fresh, false)
	if err != nil {
		return nil, err
	}
	j.st = st
	j.local = Side{Exists: st.Committed > 0, Length: st.Committed, SHA256: st.SHA256}
	if !j.local.Exists { // no committed line (or gone): as plan says of it
		putFileBuffer(data)
		j.action, j.bytes = ActionSame, 0
		return nil, nil
	}
	j.bytes = j.local.Length
	return data, nil
}

// indexLags reports whether the remote index shows a session behind what
// the bucket holds, as an earlier run of this catalog left it: the state
// says the remote held exactly the local bytes, the index shows less (a
// prefix, or not the session at all), and the session's own checkpoints
// confirm the local bytes. The index is a checkpoint that may lag (an
// append interrupted after its segment committed); the object store
// brings it up to date on the session's next append. Pushing again would
// send nothing, so the session counts as unchanged.
func (s *syncer) indexLags(ctx context.Context, j *job) bool {
	L, R := j.local.Length, j.remote.Length
	if !j.local.Exists || R >= L || j.st.SyncedLength != L || j.st.SyncedSHA256 != j.local.SHA256 {
		return false
	}
	cps, err := s.remote.Checkpoints(ctx, j.id)
	if err != nil || len(cps) == 0 {
		return false // not there after all (e.g. a new bucket): plan as usual
	}
	last := cps[len(cps)-1]
	return last.Length == L && last.SHA256 == j.local.SHA256
}

// transferBytes is what the command moves for j's plan.
func (s *syncer) transferBytes(j *job) int64 {
	switch {
	case s.cmd == cmdPush && j.action.Pushes():
		return j.local.Length - j.remote.Length
	case s.cmd == cmdPull && j.action.Pulls():
		return j.remote.Length - j.local.Length
	case s.cmd == cmdStatus && (j.action.Pushes() || j.action.Pulls()):
		return abs(j.local.Length - j.remote.Length)
	case j.action == ActionDiverged && s.o.OnDiverge == divergeKeepBoth && s.cmd == cmdPush:
		return j.local.Length
	case j.action == ActionDiverged && s.o.OnDiverge == divergeKeepBoth && s.cmd == cmdPull:
		return j.remote.Length
	}
	return 0
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// isPrefix answers whether the shorter side of j is a prefix of the
// longer, without downloading the remote when hashes can tell: the local
// prefix is hashed (or known from the state), the remote prefix hash is
// a checkpoint. Only a local length that falls inside a remote segment
// needs the overlapping part of the remote read (kept for the pull).
func (s *syncer) isPrefix(ctx context.Context, j *job) (bool, error) {
	L, R := j.local.Length, j.remote.Length
	synced := j.st.SyncedLength > 0
	if L > R {
		if synced && j.st.SyncedLength == R {
			return j.st.SyncedSHA256 == j.remote.SHA256, nil
		}
		sha, err := prefixSHA256(j.path, R)
		if err != nil {
			return false, err
		}
		return sha == j.remote.SHA256, nil
	}
	if synced && j.st.SyncedLength == L && j.st.SyncedSHA256 == j.local.SHA256 {
		return true, nil // the remote held these bytes and only appends
	}
	cps, err := s.remote.Checkpoints(ctx, j.id)
	if err != nil {
		return false, fmt.Errorf("read checkpoints of %s: %w", j.id, err)
	}
	var base Checkpoint
	for _, cp := range cps {
		if cp.Length == L {
			return cp.SHA256 == j.local.SHA256, nil
		}
		if cp.Length < L {
			base = cp
		}
	}
	// L falls inside a segment: compare from the boundary before it.
	if base.Length > 0 {
		sha, err := prefixSHA256(j.path, base.Length)
		if err != nil {
			return false, err
		}
		if sha != base.SHA256 {
			return false, nil
		}
	}
	data, err := s.readRemote(ctx, j.id, base.Length, R)
	if err != nil {
		return false, err
	}
	mine, err := readRange(j.path, base.Length, L-base.Length)
	if err != nil {
		return false, err
	}
	if !bytes.Equal(mine, data[:L-base.Length]) {
		return false, nil
	}
	j.from, j.data = base.Length, data
	return true, nil
}

// readRemote reads session id from offset from to its end, which is at
// least to: the index may lag behind the session (a writer that crashed
// before updating it), and ReadRaw reads the session itself, verified
// against its manifest.
func (s *syncer) readRemote(ctx context.Context, id string, from, to int64) ([]byte, error) {
	data, err := s.remote.ReadRaw(ctx, id, from)
	if err != nil {
		return nil, fmt.Errorf("read session %s from %s: %w", id, s.o.Remote, err)
	}
	if int64(len(data)) < to-from {
		return nil, fmt.Errorf("read session %s: the remote holds %d bytes, its index says %d: run `panto-sync verify`", id, from+int64(len(data)), to)
	}
	return data, nil
}

// execute carries out j for the command and says what happened. An
// interrupt (ctx done) stops new work, but a write that has started runs
// to its end with the index and manifest updates that follow it, so that
// Ctrl-C leaves nothing for the next run to repair.
func (s *syncer) execute(ctx context.Context, j *job) Event {
	if j.err != nil {
		ev := "failed"
		if errors.Is(j.err, agent.ErrInvalidSessionID) {
			ev = "refused"
		}
		return s.failed(j, ev, j.err)
	}
	if s.cmd == cmdStatus {
		return s.status(j)
	}
	if j.action == ActionDiverged {
		return s.diverged(ctx, j)
	}
	if j.action == ActionSame {
		if j.local.Exists {
			j.st.SyncedLength, j.st.SyncedSHA256 = j.local.Length, j.local.SHA256
		}
		if j.st.Size != 0 || j.local.Exists {
			s.setState(j.id, j.st)
		}
		e := s.ev(j, "unchanged", 0, "")
		if j.lagging {
			e.Note = fmt.Sprintf("the bucket holds all %d bytes; its index still says %d (an interrupted append; the next append to the session updates it)", j.local.Length, j.remote.Length)
		}
		return e
	}
	if s.cmd == cmdPush {
		if j.action.Pulls() {
			j.bytes = 0
			s.setState(j.id, j.st)
			return s.ev(j, "skipped", 0, fmt.Sprintf("skipped   %s: the remote is ahead by %s; run pull", j.id, humanBytes(j.remote.Length-j.local.Length)))
		}
		return s.push(ctx, j)
	}
	if j.action.Pushes() {
		j.bytes = 0
		s.setState(j.id, j.st)
		return s.ev(j, "skipped", 0, fmt.Sprintf("skipped   %s: the local file is ahead by %s; run push", j.id, humanBytes(j.local.Length-j.remote.Length)))
	}
	return s.pull(ctx, j)
}

func (s *syncer) ev(j *job, event string, n int64, text string) Event {
	return Event{Event: event, ID: j.id, Action: j.action, LocalLength: j.local.Length, RemoteLength: j.remote.Length, Bytes: n, Text: text}
}

func (s *syncer) failed(j *job, event string, err error) Event {
	e := s.ev(j, event, 0, fmt.Sprintf("%-9s %s: %v", event, j.id, err))
	e.Error = err.Error()
	j.bytes = 0
	return e
}

func (s *syncer) status(j *job) Event {
	if j.local.Exists || j.st.Size > 0 {
		s.setState(j.id, j.st)
	}
	what := map[Action]string{
		ActionSame:     "same bytes on both sides",
		ActionPushNew:  "only local: push uploads it",
		ActionPushTail: fmt.Sprintf("local is ahead by %s: push uploads the tail", humanBytes(j.local.Length-j.remote.Length)),
		ActionPullNew:  "only remote: pull downloads it",
		ActionPullTail: fmt.Sprintf("remote is ahead by %s: pull appends the tail", humanBytes(j.remote.Length-j.local.Length)),
		ActionDiverged: "diverged: neither is a prefix of the other",
	}[j.action]
	event := "status"
	if j.action == ActionSame {
		event = "unchanged"
	}
	if j.action == ActionDiverged {
		event = "diverged"
	}
	return s.ev(j, event, j.bytes, fmt.Sprintf("%-9s %s  local %d B, remote %d B: %s", j.action, j.id, j.local.Length, j.remote.Length, what))
}

// push uploads local[R:L] (all of it for a new session) as one segment.
// When the remote moved since it was read, the session is planned again
// against the remote's newest checkpoint.
func (s *syncer) push(ctx context.Context, j *job) Event {
	if s.o.DryRun {
		return s.ev(j, "would-push", j.bytes, fmt.Sprintf("would push %s  +%s (remote %d → %d B)", j.id, humanBytes(j.bytes), j.remote.Length, j.local.Length))
	}
	var read []byte // local[0:L], when the scan kept it
	if j.deferred {
		var err error
		if read, err = s.scanDeferred(j); err != nil {
			return s.failed(j, "failed", err)
		}
		if read == nil {
			return s.execute(ctx, j)
		}
		// AppendRaw keeps nothing of data: the buffer is free once it returns.
		defer putFileBuffer(read)
	}
	orig := j.remote
	for attempt := 0; ; attempt++ {
		var data []byte
		if read != nil {
			data = read[j.remote.Length:j.local.Length]
		} else {
			var err error
			if data, err = readRange(j.path, j.remote.Length, j.local.Length-j.remote.Length); err != nil {
				return s.failed(j, "failed", err)
			}
		}
		err := s.remote.AppendRaw(context.WithoutCancel(ctx), j.id, j.remote.Length, j.remote.SHA256, data)
		if err == nil {
			break
		}
		if errors.Is(err, sessionlog.ErrMalformed) {
			// The object store decodes every line and refused one: name
			// it in the file.
			if ferr := validateFile(j.path, j.id); ferr != nil {
				err = ferr
			}
			return s.failed(j, "failed", err)
		}
		if !s.remote.IsRemoteChanged(err) || attempt == 2 {
			return s.failed(j, "failed", fmt.Errorf("push to %s: %w", s.o.Remote, err))
		}
		// Someone else appended (or the index was behind): re-plan.
		cps, err := s.remote.Checkpoints(ctx, j.id)
		if err != nil && !errors.Is(err, agent.ErrSessionNotFound) {
			return s.failed(j, "failed", fmt.Errorf("push: the remote changed; re-read it: %w", err))
		}
		j.remote = Side{}
		if len(cps) > 0 {
			last := cps[len(cps)-1]
			j.remote = Side{Exists: true, Length: last.Length, SHA256: last.SHA256}
		}
		j.data = nil
		if j.action, err = Plan(j.local, j.remote, func() (bool, error) { return s.isPrefix(ctx, j) }); err != nil {
			return s.failed(j, "failed", err)
		}
		if !j.action.Pushes() {
			j.bytes = 0
			e := s.execute(ctx, j)
			e.RemoteLength = orig.Length
			return e
		}
		j.bytes = j.local.Length - j.remote.Length
	}
	j.st.SyncedLength, j.st.SyncedSHA256 = j.local.Length, j.local.SHA256
	s.setState(j.id, j.st)
	text := fmt.Sprintf("pushed    %s  +%s (remote %d → %d B)", j.id, humanBytes(j.bytes), j.remote.Length, j.local.Length)
	e := s.ev(j, "pushed", j.bytes, text)
	e.RemoteLength = orig.Length
	return e
}

// pull appends remote[L:R] to the local file (creates it for a new
// session), after checking that the result hashes to the remote's hash.
func (s *syncer) pull(ctx context.Context, j *job) Event {
	if s.o.DryRun {
		return s.ev(j, "would-pull", j.bytes, fmt.Sprintf("would pull %s  +%s (local %d → %d B)", j.id, humanBytes(j.bytes), j.local.Length, j.remote.Length))
	}
	L, R := j.local.Length, j.remote.Length
	var tail []byte
	if j.data != nil {
		tail = j.data[L-j.from:]
	} else {
		var err error
		if tail, err = s.readRemote(ctx, j.id, L, R); err != nil {
			return s.failed(j, "failed", err)
		}
	}
	h, err := resumeHasher(j.st.Hasher)
	if err != nil || !j.local.Exists {
		h, err = resumeHasher(nil)
	}
	if err != nil {
		return s.failed(j, "failed", err)
	}
	// The bytes up to R must hash to what the index says; bytes past R
	// (the index lagged) are checked by the object store's manifest.
	h.Write(tail[:R-L])
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != j.remote.SHA256 {
		return s.failed(j, "failed", fmt.Errorf("the bytes read from %s do not match its index (sha256 %s, want %s): run `panto-sync verify %s`", s.o.Remote, got[:12], short(j.remote.SHA256), s.o.Remote))
	}
	h.Write(tail[R-L:])
	newLen := L + int64(len(tail))
	// fsjsonl.AppendRaw decodes every line and checks the header names
	// the session before it writes anything.
	if err := s.local.AppendRaw(context.WithoutCancel(ctx), j.id, L, tail); err != nil {
		return s.failed(j, "failed", fmt.Errorf("pull into %s: %w", j.path, err))
	}
	sha := fmt.Sprintf("%x", h.Sum(nil))
	st := &SessionState{Committed: newLen, SHA256: sha, Lines: j.st.Lines + countLines(tail), SyncedLength: newLen, SyncedSHA256: sha, Forks: j.st.Forks, Size: -1}
	if st.Hasher, err = marshalHasher(h); err != nil {
		return s.failed(j, "failed", err)
	}
	if fi, err := os.Stat(j.path); err == nil && fi.Size() == newLen {
		st.Size, st.MtimeNS = fi.Size(), fi.ModTime().UnixNano()
	}
	s.setState(j.id, st)
	j.bytes = int64(len(tail))
	return s.ev(j, "pulled", j.bytes, fmt.Sprintf("pulled    %s  +%s (local %d → %d B)", j.id, humanBytes(j.bytes), L, newLen))
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// diverged reports a divergence, or with --on-diverge=keep-both stores
// the other side (for push the local copy, for pull the remote copy) as
// a new session whose header links to the original. Neither copy of the
// original is touched either way.
func (s *syncer) diverged(ctx context.Context, j *job) Event {
	if s.o.OnDiverge != divergeKeepBoth {
		j.bytes = 0
		s.setState(j.id, j.st)
		event := "diverged"
		return s.ev(j, event, 0, fmt.Sprintf("diverged  %s: local %d B and remote %d B, neither is a prefix of the other; left both untouched (re-run with --on-diverge=keep-both to keep both)", j.id, j.local.Length, j.remote.Length))
	}
	copied, other, where := j.local.SHA256, j.remote.SHA256, "remote"
	if s.cmd == cmdPull {
		copied, other, where = j.remote.SHA256, j.local.SHA256, "local"
	}
	for _, f := range j.st.Forks {
		if f.Direction == s.cmd && f.CopiedSHA256 == copied && f.OtherSHA256 == other {
			j.bytes = 0
			s.setState(j.id, j.st)
			e := s.ev(j, "kept-both", 0, fmt.Sprintf("kept both %s: diverged (local %d B, remote %d B); already kept as %s session %s", j.id, j.local.Length, j.remote.Length, where, f.NewID))
			e.NewID, e.ForkedFrom = f.NewID, j.id
			return e
		}
	}
	newID := agent.NewSessionID()
	if s.o.DryRun {
		e := s.ev(j, "would-keep-both", j.bytes, fmt.Sprintf("would keep both %s: diverged (local %d B, remote %d B); would store the %s copy as a new %s session", j.id, j.local.Length, j.remote.Length, map[string]string{cmdPush: "local", cmdPull: "remote"}[s.cmd], where))
		e.ForkedFrom = j.id
		return e
	}
	var text string
	if s.cmd == cmdPush {
		data, err := readRange(j.path, 0, j.local.Length)
		if err != nil {
			return s.failed(j, "failed", err)
		}
		forked, err := forkLog(data, newID, j.id)
		if err != nil {
			return s.failed(j, "failed", err)
		}
		if err := s.remote.AppendRaw(context.WithoutCancel(ctx), newID, 0, "", forked); err != nil {
			return s.failed(j, "failed", fmt.Errorf("keep both: push the local copy as %s: %w", newID, err))
		}
		text = fmt.Sprintf("kept both %s: diverged (local %d B, remote %d B); pushed the local copy as new session %s (forked_from %s); %s on the remote is untouched", j.id, j.local.Length, j.remote.Length, newID, j.id, j.id)
	} else {
		data, err := s.readRemote(ctx, j.id, 0, j.remote.Length)
		if err != nil {
			return s.failed(j, "failed", err)
		}
		if got := sha256Hex(data[:j.remote.Length]); got != j.remote.SHA256 {
			return s.failed(j, "failed", fmt.Errorf("the bytes read from %s do not match its index: run `panto-sync verify %s`", s.o.Remote, s.o.Remote))
		}
		forked, err := forkLog(data, newID, j.id)
		if err != nil {
			return s.failed(j, "failed", err)
		}
		if err := s.local.AppendRaw(context.WithoutCancel(ctx), newID, 0, forked); err != nil {
			return s.failed(j, "failed", fmt.Errorf("keep both: write the remote copy as %s: %w", newID, err))
		}
		text = fmt.Sprintf("kept both %s: diverged (local %d B, remote %d B); pulled the remote copy as new local session %s (forked_from %s); the local %s is untouched", j.id, j.local.Length, j.remote.Length, newID, j.id, j.id)
	}
	j.st.Forks = append(j.st.Forks, Fork{Direction: s.cmd, CopiedSHA256: copied, OtherSHA256: other, NewID: newID})
	s.setState(j.id, j.st)
	e := s.ev(j, "kept-both", j.bytes, text)
	e.NewID, e.ForkedFrom = newID, j.id
	return e
}

// parallel calls fn(0..count-1) on at most n goroutines, and stops
// handing out work when ctx is done.
func parallel(ctx context.Context, n, count int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < n && w < count; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < count; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			i = count
		}
	}
	close(next)
	wg.Wait()
}
