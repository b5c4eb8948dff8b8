package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/archive"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

func newKey(t testing.TB) *seal.Key {
	t.Helper()
	_, k, err := seal.GenerateKeyFile(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// putRaw stores data under key (relative to the bucket) with minio-go,
// behind the store's back.
func (e *env) putRaw(t testing.TB, key string, data []byte) {
	t.Helper()
	if e.mem != nil {
		objstore.MemPut(e.mem, key, data)
		return
	}
	if _, err := e.srv.Client(t).PutObject(context.Background(), e.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// removeRaw deletes key (relative to the bucket) behind the store's back.
func (e *env) removeRaw(t testing.TB, key string) {
	t.Helper()
	if e.mem != nil {
		objstore.MemDelete(e.mem, key)
		return
	}
	if err := e.srv.Client(t).RemoveObject(context.Background(), e.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) rawObject(t testing.TB, key string) []byte {
	t.Helper()
	if data := e.maybeRawObject(t, key); data != nil {
		return data
	}
	t.Fatalf("no object %s", key)
	return nil
}

// maybeRawObject is rawObject, nil when there is no such object.
func (e *env) maybeRawObject(t testing.TB, key string) []byte {
	t.Helper()
	for _, o := range e.rawBucket(t) {
		if o.key == key {
			return o.data
		}
	}
	return nil
}

// snapshot is every object's key and ETag: what a refused open must leave
// as it was.
func (e *env) snapshot(t testing.TB) string {
	var b strings.Builder
	for _, o := range e.rawBucket(t) {
		fmt.Fprintf(&b, "%s %s\n", o.key, o.etag)
	}
	return b.String()
}

// TestEncryptedOpen: a prefix created with a key is encrypted for good
// (its marker requires encryption, which an older panto refuses, and
// names the key's id, not the key); opening it without the key or with
// another one fails in one line that says which, and so does opening a
// plaintext prefix with a key; none of them writes anything.
func TestEncryptedOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key, other := newKey(t), newKey(t)
	e := newMemEnv(t)
	s := e.open(t, objstore.WithKey(key))
	sess := s.Create()
	if err := s.AppendMessages(ctx, sess.Info.ID, []agent.PersistentMessage{user("hello")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	marker := string(e.rawObject(t, "pfx/panto-store.json"))
	want := fmt.Sprintf(`{"format":"panto-objstore","version":3,"requires":["index-bases","index-log","index-unfolded","index-heads","index-run-deltas","encryption"],"encryption":{"scheme":"%s","key_id":"%s"}}`, seal.Scheme, key.ID())
	if marker != want {
		t.Fatalf("marker %s, want %s", marker, want)
	}
	if c, err := e.open(t, objstore.WithKey(key)).Load(ctx, sess.Info.ID); err != nil || texts(c)[0] != "hello" {
		t.Fatalf("reopen with the key: %v", err)
	}

	plain := newMemEnv(t)
	ps := plain.open(t)
	if err := ps.AppendMessages(ctx, ps.Create().Info.ID, []agent.PersistentMessage{user("plain")}); err != nil {
		t.Fatal(err)
	}
	if err := ps.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name   string
		env    *env
		opts   []objstore.Option
		target error
		says   []string
	}{
		{"no key", e, nil, objstore.ErrKeyRequired, []string{"is encrypted", key.ID().String(), "--key-file"}},
		{"another key", e, []objstore.Option{objstore.WithKey(other)}, objstore.ErrWrongKey, []string{key.ID().String(), other.ID().String(), "the key file the prefix was created with"}},
		{"a key for a plaintext prefix", plain, []objstore.Option{objstore.WithKey(key)}, objstore.ErrNotEncrypted, []string{"created without a key", "panto-sync copy"}},
	} {
		before := c.env.snapshot(t)
		_, err := c.env.tryOpen(ctx, c.opts...)
		if !errors.Is(err, c.target) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.target)
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", c.name, err, s)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: more than one line: %q", c.name, err)
		}
		if after := c.env.snapshot(t); after != before {
			t.Errorf("%s: the refused open wrote:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
}

// secretsOf are the texts and hashes a scan of an encrypted bucket must
// not find, for a session whose committed bytes are raw: its message
// texts and titles (given), and the sha256 of every run of whole lines —
// every line, every prefix, every segment — in hex, base64 and binary.
func secretsOf(raw []byte, texts ...string) [][]byte {
	out := make([][]byte, 0, len(texts))
	for _, s := range texts {
		out = append(out, []byte(s))
	}
	var ends []int
	for i, c := range raw {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	starts := append([]int{0}, ends...)
	for _, a := range starts {
		for _, b := range ends {
			if b <= a {
				continue
			}
			sum := sha256.Sum256(raw[a:b])
			out = append(out, []byte(hex.EncodeToString(sum[:])), []byte(base64.StdEncoding.EncodeToString(sum[:])),
				[]byte(base64.RawURLEncoding.EncodeToString(sum[:])), sum[:])
		}
	}
	return out
}

// views are the forms of an object a reader without the key can look
// at: its bytes; decompressed when it is zstd; and every string of it
// when it is JSON, as such and base64-decoded (and decompressed).
func views(dec *zstd.Decoder, data []byte) [][]byte {
	out := [][]byte{data}
	if raw, err := dec.DecodeAll(data, nil); err == nil {
		out = append(out, raw)
		data = raw
	}
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return out
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, []byte(v))
			if b, err := base64.StdEncoding.DecodeString(v); err == nil {
				out = append(out, b)
				if raw, err := dec.DecodeAll(b, nil); err == nil {
					out = append(out, raw)
				}
			}
		case map[string]any:
			for k, x := range v {
				out = append(out, []byte(k))
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

// scan returns the objects of the bucket in which a view shows a secret.
func (e *env) scan(t *testing.T, secrets [][]byte) []string {
	t.Helper()
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	var hits []string
	for _, o := range e.rawBucket(t) {
	found:
		for _, v := range views(dec, o.data) {
			for _, s := range secrets {
				if bytes.Contains(v, s) {
					hits = append(hits, fmt.Sprintf("%s holds %.40q", o.key, s))
					break found
				}
			}
		}
	}
	return hits
}

// fillBucket writes, through s, sessions that leave every kind of object
// in the bucket: segments and merged segments, manifests, index
// partitions, index log commits and the log's head, a title, a fork, and
// a deleted session's tombstones. It returns the secrets of the sessions
// left and those of the deleted one.
// fillRun writes, through s (WithDeferredIndex: a sync's Store), more
// sessions than a few at once, so that their entries go to a run's
// pages (their last prompts), and returns their texts.
func fillRun(t *testing.T, s *objstore.Store) [][]byte {
	t.Helper()
	ctx := context.Background()
	var secrets [][]byte
	for i := range 12 {
		text := fmt.Sprintf("synced session %d: API_KEY=ak-%06d", i, i)
		// In a project, so that the run's commit writes its head.
		p := agent.Project{Remote: "host.test/team/secret-project", Root: "/src/secret-project"}
		if err := s.AppendMessagesIn(ctx, p, agent.NewSessionID(), []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, []byte(text))
	}
	secrets = append(secrets, []byte("secret-project"))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return secrets
}

func fillBucket(t *testing.T, s *objstore.Store) [][]byte {
	t.Helper()
	ctx := context.Background()
	var secrets [][]byte
	// One commit of the index log per new session: the 64th writes the
	// log's head. The sessions after them are the newest, so the newest
	// commit lists them (their last prompts) among its recent sessions.
	for i := range manifest.RecentSize {
		text := fmt.Sprintf("padding session %d: OTP=%06d", i, i)
		id := agent.NewSessionID()
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, []byte(text))
	}
	ids := []string{"a" + agent.NewSessionID()[1:], "a" + agent.NewSessionID()[1:]}
	for n, id := range ids {
		var texts []string
		for i := range 20 {
			q := fmt.Sprintf("question %d of session %d: what does cat .env print? SECRET_TOKEN=tk-%d-%d", i, n, n, i)
			a := fmt.Sprintf("answer %d of session %d: it prints PASSWORD=pw-%d-%d", i, n, n, i)
			texts = append(texts, q, a)
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(q), msg(agent.RoleAssistant, a)}); err != nil {
				t.Fatal(err)
			}
		}
		title := fmt.Sprintf("The title of session %d, about a leaked key", n)
		texts = append(texts, title)
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{{Message: agent.TitleMessage(title)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Compact(ctx, id); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, secretsOf(rawLog(t, s, id), texts...)...)
	}
	fork, err := archive.Fork(ctx, s, ids[0], 3, t0)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, secretsOf(rawLog(t, s, fork.Info.ID))...)
	// The fork's link to its parent is content too: its id may show only
	// where the parent's own objects are named.
	secrets = append(secrets, []byte(`"parent"`), []byte("forked_from"))
	deleted := agent.NewSessionID()
	if err := s.AppendMessages(ctx, deleted, []agent.PersistentMessage{user("a session to delete: PIN 4242-deleted")}); err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, secretsOf(rawLog(t, s, deleted), "PIN 4242-deleted")...)
	deleteAll(t, s, deleted)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return secrets
}

func rawLog(t *testing.T, s *objstore.Store, id string) []byte {
	t.Helper()
	raw, err := readRaw(context.Background(), s, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestEncryptedScan: no object of an encrypted bucket shows a session's
// text, last prompt or title, a fork's link, or the sha256 of any line,
// prefix or segment of any session — neither as stored nor decompressed
// nor in any string of a document; every object but the marker and the
// probe is sealed. The same scan of a plaintext bucket finds them all
// (so the scan sees what it looks for).
func TestEncryptedScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := []objstore.Option{objstore.WithCompactThreshold(8), objstore.WithManifestInterval(2), objstore.WithCompactGrace(0)}

	plain := newMemEnv(t)
	secrets := fillBucket(t, plain.open(t, opts...))
	secrets = append(secrets, fillRun(t, plain.open(t, append(opts, objstore.WithDeferredIndex())...))...)
	hits := plain.scan(t, secrets)
	if len(hits) == 0 {
		t.Fatal("the scan finds nothing in a plaintext bucket: it is blind")
	}
	// The index log's commits hold last prompts too, and so do the
	// pages of a bulk write's run: the scan sees them.
	for _, where := range []string{"pfx/index/log/", "pfx/index/run/"} {
		if !slices.ContainsFunc(hits, func(h string) bool { return strings.HasPrefix(h, where) }) {
			t.Fatalf("the scan finds nothing under %s of a plaintext bucket: it is blind there (%d hits)", where, len(hits))
		}
	}

	e := newMemEnv(t)
	key := newKey(t)
	s := e.open(t, append(opts, objstore.WithKey(key))...)
	secrets = fillBucket(t, s)
	secrets = append(secrets, fillRun(t, e.open(t, append(opts, objstore.WithKey(key), objstore.WithDeferredIndex())...))...)
	// The deletion added its feature to the marker, which is still the
	// encrypted prefix's.
	marker := string(e.rawObject(t, "pfx/panto-store.json"))
	if want := fmt.Sprintf(`"requires":["index-bases","index-log","index-unfolded","index-heads","index-run-deltas","encryption","tombstones"],"encryption":{"scheme":"%s","key_id":"%s"}`, seal.Scheme, key.ID()); !strings.Contains(marker, want) {
		t.Errorf("marker after a deletion: %s", marker)
	}
	// A second compaction, after the grace period, deletes the replaced
	// segments: what is left is what a long-lived bucket holds.
	logs, err := s.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		if err := s.Compact(ctx, l.Info.ID); err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[string]int{}
	for _, o := range e.rawBucket(t) {
		rel := strings.TrimPrefix(o.key, "pfx/")
		switch {
		case rel == "panto-store.json" || rel == "panto-probe.json" || rel == "panto-probe-replace.json":
			kinds[rel]++
			continue
		case strings.HasSuffix(rel, ".c.jsonl.zst"):
			kinds["merged segment"]++
		case strings.Contains(rel, "/seg/"):
			kinds["segment or tombstone"]++
		case strings.HasSuffix(rel, "manifest.json"):
			kinds["manifest"]++
		case rel == "index/log-head.json.zst":
			kinds["index log head"]++
		case strings.HasPrefix(rel, "index/log/") && strings.Count(rel, "/") == 2:
			kinds["index log commit"]++
		case strings.HasPrefix(rel, "index/run/"):
			kinds["index run page"]++
		case strings.HasPrefix(rel, "index/head/"):
			kinds["project head"]++
		case strings.HasPrefix(rel, "index/") && strings.Count(rel, "/") == 1:
			kinds["index base"]++
		default:
			t.Errorf("an object of no known kind: %s", o.key)
		}
		if !sealedObject(o.data) {
			t.Errorf("%s is not sealed", o.key)
		}
	}
	t.Logf("objects: %v", kinds)
	for _, k := range []string{"merged segment", "segment or tombstone", "manifest", "index base", "index log commit", "index log head", "index run page", "project head"} {
		if kinds[k] == 0 {
			t.Errorf("the bucket holds no %s: the scan does not cover it", k)
		}
	}
	for _, hit := range e.scan(t, secrets) {
		t.Error(hit)
	}
	// And everything still reads back, through another handle.
	for _, l := range mustLogs(t, e.open(t, objstore.WithKey(key))) {
		if err := e.open(t, objstore.WithKey(key)).Verify(ctx, l.Info.ID); err != nil {
			t.Errorf("verify %s: %v", l.Info.ID, err)
		}
	}
}

// sealedObject reports whether data is a sealed envelope, or a document
// (compressed or not) whose content is one sealed field.
func sealedObject(data []byte) bool {
	if seal.IsSealed(data) {
		return true
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	if raw, err := dec.DecodeAll(data, nil); err == nil {
		data = raw
	}
	var doc struct {
		Sealed []byte `json:"sealed"`
	}
	return json.Unmarshal(data, &doc) == nil && seal.IsSealed(doc.Sealed)
}

// TestEncryptedTamper: a flipped byte, a segment copied from another
// session, one moved to another position of its own, a manifest of
// another session and a plaintext segment slipped in all fail with an
// error that names the object; none of them is read as data.
func TestEncryptedTamper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := newKey(t)
	e := newMemEnv(t)
	s := e.open(t, objstore.WithKey(key), objstore.WithManifestInterval(1), objstore.WithCompactThreshold(0), partitionsAtClose())
	a, b := agent.NewSessionID(), agent.NewSessionID()
	// One checkpoint per append, so that the index entry says a manifest
	// is stored and a Load reads it (an entry written with the first
	// manifest says none is, and a Load probes past it).
	for _, id := range []string{a, b} {
		for i := range 3 {
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprintf("message %d of %s", i, id))}); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	ma := readManifestWith(t, e, key, a)
	segKey := func(id string, seg manifest.Segment) string { return "pfx/sessions/" + id + "/" + seg.Name() }
	second := segKey(a, ma.Segments[1])

	for _, c := range []struct {
		name   string
		key    string
		data   func() []byte
		target error
	}{
		{"flipped byte", second, func() []byte {
			d := e.rawObject(t, second)
			d[len(d)-20] ^= 0x01
			return d
		}, seal.ErrAuth},
		{"segment of another session", segKey(a, ma.Segments[0]), func() []byte {
			return e.rawObject(t, "pfx/sessions/"+b+"/seg/00000000000000000000.jsonl.zst")
		}, seal.ErrAuth},
		{"segment from another position", second, func() []byte { return e.rawObject(t, segKey(a, ma.Segments[2])) }, seal.ErrAuth},
		{"manifest of another session", "pfx/sessions/" + a + "/manifest.json", func() []byte {
			return e.rawObject(t, "pfx/sessions/"+b+"/manifest.json")
		}, seal.ErrAuth},
		{"plaintext segment after the end", "pfx/sessions/" + a + "/" + manifest.SegmentName(ma.Length), func() []byte {
			line, _ := sessionlog.EncodeBatch(a, false, []agent.PersistentMessage{user("injected")}, t0)
			codec, _ := manifest.NewCodec()
			return codec.Compress(line)
		}, seal.ErrNotSealed},
	} {
		before := e.maybeRawObject(t, c.key)
		e.putRaw(t, c.key, c.data())
		_, err := e.open(t, objstore.WithKey(key)).Load(ctx, a)
		if !errors.Is(err, objstore.ErrCorrupt) || !errors.Is(err, c.target) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: load says %v; want %v naming %s", c.name, err, c.target, c.key)
		}
		t.Logf("%s: %v", c.name, err)
		if strings.Contains(fmt.Sprint(err), "injected") {
			t.Errorf("%s: the error shows content: %v", c.name, err)
		}
		if before != nil {
			e.putRaw(t, c.key, before)
		} else {
			e.removeRaw(t, c.key)
		}
	}
	if _, err := e.open(t, objstore.WithKey(key)).Load(ctx, a); err != nil {
		t.Fatalf("after the repair: %v", err)
	}

	// A damaged index partition is said to be damaged, as in a plaintext
	// prefix, and hides only its own sessions (the writer's Close folds
	// them into it).
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	shard := partitionKey(a)
	d := e.rawObject(t, shard)
	d[len(d)/2] ^= 0x01
	e.putRaw(t, shard, d)
	if _, err := e.open(t, objstore.WithKey(key)).List(ctx); !errors.Is(err, objstore.ErrIndexDamaged) {
		t.Errorf("a flipped byte in an index shard: %v", err)
	}
}

// readManifestWith reads session id's manifest with the key, as a store
// would.
func readManifestWith(t *testing.T, e *env, key *seal.Key, id string) *manifest.Manifest {
	t.Helper()
	codec, _ := manifest.NewCodec()
	rel := "sessions/" + id + "/manifest.json"
	m, err := codec.WithSealer(key).DecodeManifest(rel, e.rawObject(t, "pfx/"+rel))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEncryptedCheckpoints: an encrypted store exposes the same
// checkpoints as a plaintext one (the sha256 of the plaintext prefixes,
// kept sealed in the bucket), so that sync compares it with a local
// catalog, or with a prefix sealed under another key, as before.
func TestEncryptedCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := agent.NewSessionID()
	b1, _ := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{user("a")}, t0)
	b2, _ := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("b")}, t0)
	var got [][]store.Checkpoint
	for _, key := range []*seal.Key{nil, newKey(t), newKey(t)} {
		var opts []objstore.Option
		if key != nil {
			opts = append(opts, objstore.WithKey(key))
		}
		s := newMemEnv(t).open(t, opts...)
		if err := appendRaw(ctx, s, id, 0, "", b1); err != nil {
			t.Fatal(err)
		}
		if err := appendRaw(ctx, s, id, int64(len(b1)), sum(b1), b2); err != nil {
			t.Fatal(err)
		}
		cps, err := s.Checkpoints(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, cps)
	}
	all := append(append([]byte{}, b1...), b2...)
	want := []store.Checkpoint{{Length: int64(len(b1)), SHA256: sum(b1)}, {Length: int64(len(all)), SHA256: sum(all)}}
	for i, cps := range got {
		if fmt.Sprint(cps) != fmt.Sprint(want) {
			t.Errorf("store %d: checkpoints %v, want %v", i, cps, want)
		}
	}
}
