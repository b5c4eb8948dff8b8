package replica

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/panto-dev/panto/internal/sessionlog"
)

// forkID is the id of the copy KeepBoth makes of session id when its
// copies hold srcSHA and dstSHA: derived from the three, so that running
// the same copy again finds the copy it made instead of making another.
// It looks like any other id (32 hex digits).
func forkID(id, srcSHA, dstSHA string) string {
	sum := sha256.Sum256([]byte("panto keep-both\x00" + id + "\x00" + srcSHA + "\x00" + dstSHA))
	return hex.EncodeToString(sum[:16])
}

// forkReader returns log (the whole committed log of session from, as a
// stream) as session newID: the header line is rewritten with the new id
// and a forked_from link to the original; every other byte is kept. It
// also returns by how many bytes the new header is longer than the old.
func forkReader(log io.Reader, newID, from string) (io.Reader, int64, error) {
	br := bufio.NewReader(log)
	line, err := br.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("no header line")
		}
		return nil, 0, fmt.Errorf("copy session %s as %s: %w", from, newID, err)
	}
	var h sessionlog.Header
	if err := json.Unmarshal(line, &h); err != nil || h.Type != sessionlog.TypeSession || h.ID != from {
		return nil, 0, fmt.Errorf("copy session %s as %s: the first line is not its header", from, newID)
	}
	// The header links the copy to its original (sessionlog.Header's
	// forked_from; no forked_at: the copy holds the whole log) and keeps
	// the rest of it (the project, an import's origin).
	h.ID, h.ForkedFrom, h.ForkedAt = newID, from, 0
	header, err := sessionlog.EncodeHeader(h)
	if err != nil {
		return nil, 0, fmt.Errorf("copy session %s as %s: %w", from, newID, err)
	}
	return io.MultiReader(bytes.NewReader(header), br), int64(len(header) - len(line)), nil
}
