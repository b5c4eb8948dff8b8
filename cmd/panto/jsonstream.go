package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// jsonDocStream writes, a part at a time, the document writeJSON writes
// of a struct whose last field is an array (show --json's messages,
// export's): the struct with that array empty, cut before the array's
// end, then each element as it comes, then the end. A session of any
// size is then written in the memory of one element, byte for byte as
// one json.Encoder (two spaces of indent, HTML unescaped) writes it
// whole.
type jsonDocStream struct {
	n   int
	buf bytes.Buffer
}

// head writes doc, whose last field is an empty array, up to that
// array's "[".
func (s *jsonDocStream) head(w io.Writer, doc any) error {
	s.buf.Reset()
	if err := writeJSON(&s.buf, doc); err != nil {
		return err
	}
	data, ok := bytes.CutSuffix(s.buf.Bytes(), []byte("]\n}\n"))
	if !ok {
		return errors.New("the JSON document does not end in an array")
	}
	_, err := w.Write(data)
	return err
}

// element writes the next element of the array.
func (s *jsonDocStream) element(w io.Writer, v any) error {
	s.buf.Reset()
	enc := json.NewEncoder(&s.buf)
	enc.SetIndent("    ", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	sep := ",\n    "
	if s.n == 0 {
		sep = "\n    "
	}
	s.n++
	if _, err := io.WriteString(w, sep); err != nil {
		return err
	}
	_, err := w.Write(bytes.TrimSuffix(s.buf.Bytes(), []byte("\n")))
	return err
}

// end closes the array and the document.
func (s *jsonDocStream) end(w io.Writer) error {
	if s.n > 0 {
		if _, err := io.WriteString(w, "\n  "); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]\n}\n")
	return err
}
