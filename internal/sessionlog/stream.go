package sessionlog

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/panto-dev/panto/agent"
)

// This file reads logs as streams, so that a session is never held in
// memory whole: a log may be larger than the memory of the machine that
// copies it.

// Batches cuts a stream of committed lines into chunks of whole batches,
// each at most max bytes unless a single batch is larger (then that batch
// alone, up to MaxBatch). It is how a copy moves a log in bounded memory,
// each chunk one conditional append.
type Batches struct {
	r     io.Reader
	name  string
	max   int
	limit int // where the window is cut: max, or more for a batch larger than max
	buf   []byte
	n     int // bytes of buf filled
	off   int // start of what the last chunk left in buf
	eof   bool
}

// MaxBatch bounds one batch (one atomic append): a batch larger than this
// is refused rather than read into memory.
const MaxBatch = 1 << 30

// NewBatches returns a Batches reading r, which must hold committed lines
// from a batch boundary on; name is used in errors.
func NewBatches(r io.Reader, name string, max int) *Batches {
	return &Batches{r: r, name: name, max: max, limit: max}
}

// Next returns the next chunk, valid until the following call, or io.EOF
// after the last. A stream that ends inside a batch is ErrMalformed.
func (b *Batches) Next() ([]byte, error) {
	if b.off > 0 { // move what the last chunk left to the front
		b.n = copy(b.buf, b.buf[b.off:b.n])
		b.off = 0
	}
	for {
		if b.eof || b.n >= b.limit {
			if b.n == 0 {
				return nil, io.EOF
			}
			// The window starts at a batch boundary, so CommittedLength's
			// backward scan finds the last batch end in it.
			k, err := CommittedLength(b.name, b.buf[:b.n])
			if err != nil {
				return nil, err
			}
			if k > b.max {
				// The window holds more than max (it grew for one batch
				// larger than that, or what the last one left is): the
				// whole batches that fit in max, or else the first batch
				// alone.
				if k2, err := CommittedLength(b.name, b.buf[:b.max]); err == nil && k2 > 0 {
					k = k2
				} else if k, err = firstBatchEnd(b.name, b.buf[:k]); err != nil {
					return nil, err
				}
			}
			if k > 0 {
				b.off, b.limit = k, b.max
				return b.buf[:k], nil
			}
			if b.eof {
				return nil, fmt.Errorf("%s: %w: the log ends inside a batch (%d bytes after the last batch end)", b.name, ErrMalformed, b.n)
			}
			if b.limit >= MaxBatch {
				return nil, fmt.Errorf("%s: %w: a batch larger than %d bytes", b.name, ErrMalformed, MaxBatch)
			}
			b.limit = min(2*b.limit, MaxBatch) // one batch larger than the window
			continue
		}
		if b.n == len(b.buf) && b.n < b.limit {
			// Grow by doubling, from a small buffer: most logs are far
			// smaller than a chunk, and a buffer of max bytes each would
			// be megabytes of garbage per session.
			grown := make([]byte, min(max(2*len(b.buf), 64<<10), b.limit))
			copy(grown, b.buf[:b.n])
			b.buf = grown
		}
		k, err := b.r.Read(b.buf[b.n:min(len(b.buf), b.limit)])
		b.n += k
		if errors.Is(err, io.EOF) {
			b.eof = true
		} else if err != nil {
			return nil, fmt.Errorf("read %s: %w", b.name, err)
		}
	}
}

// firstBatchEnd returns the length of the first batch of data, which
// holds at least one whole batch.
func firstBatchEnd(name string, data []byte) (int, error) {
	end := 0
	for end < len(data) {
		i := bytes.IndexByte(data[end:], '\n')
		if i < 0 {
			break
		}
		li, err := readLineInfo(data[end : end+i])
		if err != nil {
			return 0, fmt.Errorf("%s: %w: not a session log line", name, ErrMalformed)
		}
		end += i + 1
		if li.More == 0 {
			return end, nil
		}
	}
	return 0, fmt.Errorf("%s: %w: no whole batch", name, ErrMalformed)
}

// Check reads a whole log from r and checks that it is one: every line
// decodes (as DecodeLine would; the header first), the last one ends a batch, and
// the bytes are length long with the given hex sha256 (when sha256Hex is
// not empty), and the header names session id. It returns the log's
// summary. name is used in errors.
func Check(name, id string, r io.Reader, length int64, sha256Hex string) (agent.SessionInfo, error) {
	h := sha256.New()
	br := getReader(io.TeeReader(r, h))
	defer putReader(br)
	d := Decoder{Name: name}
	var n int64
	var last []byte
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			n += int64(len(line))
			if line[len(line)-1] != '\n' {
				return agent.SessionInfo{}, fmt.Errorf("%s:%d: %w: the last line has no newline", name, d.Line+1, ErrMalformed)
			}
			// SummarizeLine accepts and refuses exactly the lines
			// DecodeLine does (FuzzSummarizeLine), several times faster.
			if _, derr := d.SummarizeLine(line[:len(line)-1]); derr != nil {
				return agent.SessionInfo{}, derr
			}
			last = line
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return agent.SessionInfo{}, fmt.Errorf("read %s: %w", name, err)
		}
	}
	if d.Header == nil {
		return agent.SessionInfo{}, fmt.Errorf("%s: %w: no lines", name, ErrMalformed)
	}
	if d.Header.ID != id {
		return agent.SessionInfo{}, fmt.Errorf("%s:1: %w: the header names session %q, not %q", name, ErrMalformed, d.Header.ID, id)
	}
	if li, err := readLineInfo(bytes.TrimSuffix(last, []byte{'\n'})); err != nil || li.More != 0 {
		return agent.SessionInfo{}, fmt.Errorf("%s:%d: %w: the log ends inside a batch", name, d.Line, ErrMalformed)
	}
	if n != length {
		return agent.SessionInfo{}, fmt.Errorf("%s: %d bytes, expected %d", name, n, length)
	}
	if got := hex.EncodeToString(h.Sum(nil)); sha256Hex != "" && got != sha256Hex {
		return agent.SessionInfo{}, fmt.Errorf("%s: sha256 %s, expected %s", name, got, sha256Hex)
	}
	return d.Info, nil
}

// readers recycles the buffered readers of ReadLines and Check: a list of
// a cold catalog reads every file through one, and a buffer each would be
// a megabyte of garbage per file.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 256<<10) }}

func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil) // hold no reference to the file it read
	readers.Put(br)
}

// readLine reads one line, '\n' included, however long.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	long := bytes.Clone(line)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = br.ReadSlice('\n')
		long = append(long, line...)
	}
	return long, err
}

// ReadLines calls fn for each line of r, without its '\n', however long;
// a last line without a newline is passed too, with last set (it is not
// committed: callers that read committed bytes never see one). The line
// is valid only during the call.
func ReadLines(r io.Reader, fn func(line []byte, last bool) error) error {
	br := getReader(r)
	defer putReader(br)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			complete := line[len(line)-1] == '\n'
			if complete {
				line = line[:len(line)-1]
			}
			if ferr := fn(line, !complete); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
