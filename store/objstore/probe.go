package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// ErrConditionalWrites: the server does not honour conditional writes
// (If-None-Match: * and If-Match on PutObject), on which every append and
// checkpoint relies (docs/DESIGN.md §P1–§P3). Several S3-compatible
// servers accept the headers and ignore them; against one of those,
// concurrent appends overwrite each other and acknowledged messages are
// lost, so the store refuses it at Open.
var ErrConditionalWrites = errors.New("the S3 server does not honour conditional writes")

// probeName and replaceProbeName are the objects the probe writes, the
// create-if-absent and the replace: always these bytes, so that a server
// that ignores the conditions overwrites them with themselves. Two
// objects, so that the two PUTs do not contend for one object's lock on
// the server (MinIO then stalls one of them by tens of milliseconds, and
// with it Open).
const (
	probeName        = "panto-probe.json"
	replaceProbeName = "panto-probe-replace.json"
)

var probeBody = []byte(`{"format":"panto-probe","about":"panto checks at every open that the server refuses a create of an existing object and a replace of a changed one; this object may be deleted"}`)

// probeOutcome is what one conditional PUT of the probe came to.
type probeOutcome int

const (
	probeRefused     probeOutcome = iota // 412: the condition was honoured
	probeWritten                         // the PUT succeeded
	probeMissing                         // If-Match on a missing object: 404
	probeUnsupported                     // 501 NotImplemented, or the header is refused
	probeForbidden                       // the credentials cannot write
)

// probe checks, on every Open (a server can change under a prefix), that
// the server honours both conditions: a create-if-absent of the probe
// object, which exists, must be refused, and so must a replace of the
// other one whose If-Match names a wrong ETag. The two PUTs run in
// parallel with the marker read, so Open still costs one round trip; only
// the first Open of a prefix, which makes the probe objects, asks once
// more.
//
// It returns nil when the server honours both, or when the credentials
// cannot write at all (then no write of this Store can succeed either).
func (s *Store) probe(ctx context.Context, created probeOutcome, matched probeOutcome) error {
	for attempt := 0; ; attempt++ {
		switch {
		case created == probeForbidden || matched == probeForbidden:
			return nil
		case created == probeUnsupported || matched == probeUnsupported:
			return s.notImplemented()
		case matched == probeWritten:
			return fmt.Errorf("%w: %w: %s: it replaced an object whose If-Match named a wrong ETag, so two writers would overwrite each other's checkpoints: use a server that honours If-Match (AWS S3, MinIO, Cloudflare R2, versitygw 1.8 or later) or keep sessions in a directory",
				ErrOpen, ErrConditionalWrites, s.b.url(""))
		case created == probeWritten && attempt > 0:
			return fmt.Errorf("%w: %w: %s: it created an object that already existed although the PUT said If-None-Match: *, so concurrent appends would overwrite each other and lose messages: use a server that honours it (AWS S3, MinIO, Cloudflare R2, versitygw 1.8 or later) or keep sessions in a directory",
				ErrOpen, ErrConditionalWrites, s.b.url(""))
		case created == probeRefused && matched == probeRefused:
			return nil
		}
		// The probe object did not exist (this create made it, or the
		// If-Match found nothing): ask again, now that it does. A loaded
		// distributed MinIO has answered one If-Match with a 404 right
		// after the object's create: a third ask settles it.
		if attempt > 1 || attempt == 1 && matched != probeMissing {
			return fmt.Errorf("%w: %s: the conditional-write probe gave no clear answer (create %d, replace %d)", ErrOpen, s.b.url(""), created, matched)
		}
		var err error
		if created, matched, err = s.probePuts(ctx, matched == probeMissing); err != nil {
			return err
		}
	}
}

// probePuts sends the two probe PUTs at once: the create-if-absent of
// probeName and the replace of replaceProbeName with a wrong ETag, the
// latter after creating that object when makeReplace says it is missing.
func (s *Store) probePuts(ctx context.Context, makeReplace bool) (created, matched probeOutcome, err error) {
	var createErr, matchErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); created, createErr = s.probePut(ctx, probeName, putCond{ifNoneMatch: true}) }()
	go func() {
		defer wg.Done()
		if makeReplace {
			made, err := s.probePut(ctx, replaceProbeName, putCond{ifNoneMatch: true})
			if err != nil || made == probeUnsupported || made == probeForbidden {
				matched, matchErr = made, err
				return
			}
		}
		matched, matchErr = s.probePut(ctx, replaceProbeName, wrongETag)
	}()
	wg.Wait()
	return created, matched, errors.Join(createErr, matchErr)
}

// wrongETag is the replace probe's condition: an ETag no object has.
var wrongETag = putCond{ifMatch: `"00000000000000000000000000000000"`}

// notImplemented is the error of a server that answers 501 to the
// conditional headers.
func (s *Store) notImplemented() error {
	return fmt.Errorf("%w: %w: %s: it answers NotImplemented to If-None-Match or If-Match on PutObject; panto needs both to append without locks: use a server that has them (AWS S3, MinIO, Cloudflare R2, versitygw 1.8 or later) or keep sessions in a directory",
		ErrOpen, ErrConditionalWrites, s.b.url(""))
}

// probePut is one conditional PUT of the probe object key.
func (s *Store) probePut(ctx context.Context, key string, cond putCond) (probeOutcome, error) {
	_, err := s.b.put(ctx, key, probeBody, cond, "application/json")
	if err == nil {
		return probeWritten, nil
	}
	if errors.Is(err, errPrecondition) || errors.Is(err, errConflict) {
		return probeRefused, nil
	}
	switch {
	case errors.Is(err, errNotImplemented):
		return probeUnsupported, nil
	case errors.Is(err, errNotFound) && cond.ifMatch != "":
		return probeMissing, nil
	case errors.Is(err, errForbidden):
		s.mu.Lock()
		if s.writeRefused == nil {
			s.writeRefused = err
		}
		s.mu.Unlock()
		return probeForbidden, nil
	}
	return 0, err
}

// startProbe sends the probe, or joins the one under way (probes, a
// singleflight.Group: the writes until it passes wait for one probe),
// with the context of the write that sends it: a probe that write's end
// cut short fails, and a write waiting for it sends its own
// (ensureProbed). Its outcome is settled before the flight ends, so a
// write after it finds probeLater as the probe left it.
func (s *Store) startProbe(ctx context.Context) <-chan singleflight.Result {
	return s.probes.DoChan("probe", func() (any, error) {
		created, matched, err := s.probePuts(ctx, false)
		if err != nil {
			err = s.b.explainOpenError(err)
		} else {
			err = s.probe(ctx, created, matched)
		}
		if err != nil && ctx.Err() != nil {
			err = ctx.Err() // the sending write's end, not the server's answer
		}
		s.probeMu.Lock()
		defer s.probeMu.Unlock()
		switch {
		case err == nil:
			s.noteProbe()
			s.probeLater = false
		case errors.Is(err, ErrConditionalWrites):
			// Once the server is known to ignore the conditions, no
			// write goes beside a probe again: each probes first, and
			// is refused before it is sent; and the note of the last
			// pass goes, so that the next Open refuses the prefix.
			s.probeBeside = false
			s.forgetProbe()
		}
		return nil, err // a failure: the next write probes again
	})
}

// waitProbe is the outcome of the probe of flight, once it is known.
func waitProbe(ctx context.Context, flight <-chan singleflight.Result) error {
	select {
	case r := <-flight:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeAside returns the probe a write goes out beside (sending it if
// none is under way), or nil when the write needs none or must wait for
// it first (put).
func (s *Store) probeAside(ctx context.Context) <-chan singleflight.Result {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if !s.probeLater || !s.probeBeside {
		return nil
	}
	return s.startProbe(ctx)
}

// WriteRefused returns, when Open's probe found that the credentials may
// not write (a reader's), the server's refusal as one line naming the
// permission to grant (a *PermissionError); nil otherwise. A caller that
// would accept a write now and send it later (store/localfirst) refuses it
// at once instead.
func (s *Store) WriteRefused() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeRefused
}

// probeTrust is how long a machine that keeps an index cache
// (WithIndexCache) trusts a bucket's last probe: its Opens within it send
// no probe PUTs (two PUTs, the dearest requests of an Open). A server
// swapped under the same endpoint and bucket within it goes unprobed
// until then.
const probeTrust = 24 * time.Hour

// probePath is where the time of this bucket's last successful probe is
// kept, beside its cached catalog; "" without a cache.
func (s *Store) probePath() string {
	if p := s.catalogPath(); p != "" {
		return strings.TrimSuffix(p, ".json.zst") + ".probed"
	}
	return ""
}

// probeNote returns when this machine last saw the bucket's probe pass,
// with both conditions honoured; false when it never did (or keeps no
// cache to note it in).
func (s *Store) probeNote() (time.Time, bool) {
	path := s.probePath()
	if path == "" {
		return time.Time{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
	if err != nil {
		return time.Time{}, false
	}
	return at, true
}

// trusted reports whether a probe that passed at is recent enough
// (probeTrust) to spare an Open its own.
func (s *Store) trusted(at time.Time) bool {
	age := s.now().Sub(at)
	return age >= 0 && age < probeTrust
}

// forgetProbe removes the note of the last pass: the next Open probes.
func (s *Store) forgetProbe() {
	if path := s.probePath(); path != "" {
		_ = os.Remove(path)
	}
}

// noteProbe records the probe just sent: its time when it passed, and
// forgets the last pass when the credentials may not write, so that the
// next Open probes at once. A failure
// only costs the next Open its probe.
func (s *Store) noteProbe() {
	path := s.probePath()
	if path == "" {
		return
	}
	if s.WriteRefused() != nil {
		s.forgetProbe()
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	_ = os.WriteFile(path, []byte(s.now().UTC().Format(time.RFC3339Nano)+"\n"), 0o600)
}
