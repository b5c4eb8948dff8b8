package sessionlog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
)

// bothPaths decodes the complete lines of data with DecodeLine and with
// SummarizeLine and fails t unless both accept the same lines, refuse the
// same line (with the same file:line) and fold the same Info.
func bothPaths(t *testing.T, d sessionlog.Decoder, data []byte) (sessionlog.Decoder, error) {
	t.Helper()
	full, sum := d, d
	if d.Header != nil {
		h := *d.Header
		sum.Header = &h
	}
	fullErr := sessionlog.Lines(data, func(l []byte) error { _, _, err := full.DecodeLine(l); return err })
	sumErr := sessionlog.Lines(data, func(l []byte) error { _, err := sum.SummarizeLine(l); return err })
	if (fullErr == nil) != (sumErr == nil) {
		t.Fatalf("DecodeLine: %v\nSummarizeLine: %v\ndata: %q", fullErr, sumErr, data)
	}
	if fullErr != nil {
		if where(fullErr) != where(sumErr) {
			t.Fatalf("DecodeLine: %v\nSummarizeLine: %v", fullErr, sumErr)
		}
		return full, fullErr
	}
	if !reflect.DeepEqual(full.Info, sum.Info) || full.Line != sum.Line || !reflect.DeepEqual(full.Header, sum.Header) {
		t.Fatalf("DecodeLine folds %+v (line %d)\nSummarizeLine folds %+v (line %d)\ndata: %q", full.Info, full.Line, sum.Info, sum.Line, data)
	}
	return full, nil
}

// where is the "file:line" an error starts with.
func where(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i >= 0 {
		return s[:i]
	}
	return s
}

// TestSummarizeLineMatchesDecodeLine: over many realistic generated logs,
// SummarizeLine folds exactly the Info that DecodeLine does, one line at a
// time and resumed at every batch, and every line EncodeBatch writes
// takes the fast path.
func TestSummarizeLineMatchesDecodeLine(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 20
	}
	start := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	for seed := range uint64(n) {
		g := sessiongen.New(seed)
		id := fmt.Sprintf("%016x%016x", seed, seed*7919)
		log, err := g.Session(id, 2_000+int(seed%17)*5_000, start.Add(time.Duration(seed)*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		// A compaction summary, a typed prompt with escapes and an answer
		// cut off after redacted thinking, appended.
		extra, err := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{
			{Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.TextBlock("summary")},
				Metadata: map[string]any{agent.MetadataCompaction: true, "n": 3.5}}},
			{Message: agent.UserText(fmt.Sprintf("fix \"it\"\n\tnow <%d> é ✓ \x01", seed))},
			{Message: agent.SystemText("be terse", agent.SystemAppend), Identity: agent.WireIdentity{Model: "ignored"}},
			{Message: agent.Message{Role: agent.RoleAssistant, StopReason: "max_tokens", Content: []agent.Block{
				{Type: agent.BlockRedactedThinking, Data: "EmwKAhgBEgy3va+/="}, agent.TextBlock("cut o"),
			}}, Identity: agent.WireIdentity{Model: "m"}, Usage: &agent.Usage{InputTokens: 7, CacheWriteTokens: 1 << 40, ReasoningTokens: 3}},
			{Message: agent.TitleMessage(fmt.Sprintf("title \"%d\" ✓", seed))},
		}, start)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, extra...)
		d, err := bothPaths(t, sessionlog.Decoder{Name: "s"}, log)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if d.Info.MessageCount == 0 || d.Info.LastUserMessage == "" || d.Info.Title != fmt.Sprintf("title \"%d\" ✓", seed) ||
			d.Info.Usage.CacheWriteTokens < 1<<40 || d.Info.Usage.InputTokens <= 7 || d.Info.Usage.OutputTokens == 0 {
			t.Fatalf("seed %d: info %+v", seed, d.Info)
		}
		lines := 0
		sessionlog.Lines(log, func(l []byte) error {
			if lines++; lines > 1 && !sessionlog.ScanSummary(l) {
				t.Fatalf("seed %d line %d does not take the fast path: %s", seed, lines, l)
			}
			return nil
		})
	}
}

// summaryLines are lines the fast path must refuse to interpret or must
// read exactly as encoding/json does.
var summaryLines = []string{
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"hi"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"a\u00e9\ud800\"b"}],"api_style":"openai-chat","model":"m","more":0}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","text":"r","tool_use_id":"x","is_error":true}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"a","text":"b"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"a","text":null}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","TEXT":"upper"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":1}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","signature":{}}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","input":{"a":[1,2e5,-0.5,true,null]}}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","is_error":"yes"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[null]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":null}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":"x"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[],"metadata":{"panto.compaction":true}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[],"metadata":[]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[],"metadata":{"x":1e999}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"input_tokens":12,"output_tokens":1.5}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"input_tokens":99999999999999999999}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"input_tokens":-3}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"more":01}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"more":1.0}`,
	`{"type":"message","ts":"2026-13-01T00:00:00Z","role":"assistant","content":[]}`,
	`{"type":"message","ts":null,"role":"assistant","content":[]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"robot","content":[]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[],"unknown":{"deep":[[[]]]}}`,
	`{"type":"message","type":"session","ts":"2026-01-01T00:00:00Z","role":"user","content":[]}`,
	`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[]} x`,
	` {"type" : "message" , "ts":"2026-01-01T00:00:00Z","role":"user","content":[ ] } `,
	"{\"type\":\"message\",\"ts\":\"2026-01-01T00:00:00Z\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"bad \x01 control\"}]}",
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"bad \q escape"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"\u12"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"ok"},]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"ok"}],}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","input":tru}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","input":-}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","input":1.}]}`,
	"{\"type\":\"message\",\"ts\":\"2026-01-01T00:00:00Z\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe \u00e9\"}]}",
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"te\u0078t","text":"escaped type"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"x"}],"api_style":"a","base_url":"b","model":"c","reasoning":"d"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"system","content":[{"type":"system","text":"x","mode":"append"}],"model":"c"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"redacted_thinking","data":"EmwK+/="}],"stop_reason":"max_tokens"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"stop_reason":null}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"stop_reason":1}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"stop_reason":"a","stop_reason":"b"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"Stop_Reason":"end_turn"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"stop_reason":"bad \q"}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"redacted_thinking","data":null}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"redacted_thinking","data":{}}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"redacted_thinking","data":"a","data":"b"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"redacted_thinking","DATA":"x"}]}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":3,"cache_write_tokens":4,"reasoning_tokens":5}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"reasoning_tokens":5,"input_tokens":-1}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":null}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"input_tokens":1,"input_tokens":2}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"Input_Tokens":9}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[],"usage":{"input_tokens":null}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"system","content":[],"metadata":{"panto.title":"a title"}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"system","content":[],"metadata":{"panto.title":""}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"system","content":[],"metadata":{"panto.title":7}}`,
	`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[],"metadata":{"panto.title":"not on a user"}}`,
	`null`,
	`[]`,
	``,
	`{`,
}

const testHeader = `{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","more":1}`

func TestSummarizeLineEdgeCases(t *testing.T) {
	for _, l := range summaryLines {
		bothPaths(t, sessionlog.Decoder{Name: "f"}, []byte(testHeader+"\n"+l+"\n"))
		sameLineInfo(t, []byte(l))
	}
}

// sameLineInfo: what CommittedLength reads of a line is what
// encoding/json reads.
func sameLineInfo(t *testing.T, line []byte) {
	t.Helper()
	var want struct {
		Type string `json:"type"`
		More int    `json:"more"`
	}
	wantErr := json.Unmarshal(line, &want)
	typ, more, err := sessionlog.ReadLineInfo(line)
	if (err == nil) != (wantErr == nil) || err == nil && (typ != want.Type || more != want.More) {
		t.Fatalf("line %q: read %q %d %v, encoding/json %q %d %v", line, typ, more, err, want.Type, want.More, wantErr)
	}
}

// FuzzSummarizeLine: for any line after a header, SummarizeLine accepts
// exactly what DecodeLine accepts and folds the same Info, and
// CommittedLength reads what encoding/json reads.
func FuzzSummarizeLine(f *testing.F) {
	for _, l := range summaryLines {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return
		}
		bothPaths(t, sessionlog.Decoder{Name: "f"}, []byte(testHeader+"\n"+string(line)+"\n"))
		sameLineInfo(t, line)
	})
}

// TestScanStringEdges: the fast path accepts a content string exactly
// when encoding/json does, for every special byte at every offset around
// the scanner's 8-byte steps.
func TestScanStringEdges(t *testing.T) {
	specials := []string{`"`, `\`, `\\`, `\"`, `\t`, `\t\t\t`, `\/`, `\u00e9`, `\u00g9`, `\u00`, `\x`, "\x01", "\x1f", "\x7f", "é", "\xff", `\\\"`, `\\\`}
	for _, sp := range specials {
		for pre := 0; pre < 18; pre++ {
			for post := 0; post < 10; post++ {
				text := strings.Repeat("a", pre) + sp + strings.Repeat("b", post)
				line := []byte(`{"type":"message","ts":"2026-06-01T09:00:00Z","role":"user","content":[{"type":"text","text":"` + text + `"}]}`)
				if got, want := sessionlog.ScanSummary(line), json.Valid(line); got != want {
					t.Errorf("text %q: fast path accepts %v, encoding/json %v", text, got, want)
				}
				// The string cut short at the end of the line.
				cut := []byte(`{"type":"message","role":"user","content":[{"type":"text","text":"` + text)
				if sessionlog.ScanSummary(cut) {
					t.Errorf("text %q cut at the end of the line: accepted", text)
				}
			}
		}
	}
}

// TestForkedHeader: the header's fork link reaches the summary, on both
// paths, and an older header without one leaves it empty.
func TestForkedHeader(t *testing.T) {
	body := `{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"hi"}]}` + "\n"
	tests := []struct {
		header   string
		parent   string
		forkedAt int
		bad      bool
	}{
		{`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","more":1}`, "", 0, false},
		{`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","forked_from":"p1","more":1}`, "p1", 0, false},
		{`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","forked_from":"p1","forked_at":12,"more":1}`, "p1", 12, false},
		{`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","forked_from":3,"more":1}`, "", 0, true},
		{`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","forked_at":1.5,"more":1}`, "", 0, true},
	}
	for _, tt := range tests {
		d, err := bothPaths(t, sessionlog.Decoder{Name: "f"}, []byte(tt.header+"\n"+body))
		if (err != nil) != tt.bad {
			t.Errorf("%s: err %v, want bad %v", tt.header, err, tt.bad)
			continue
		}
		if err == nil && (d.Info.Parent != tt.parent || d.Info.ForkedAt != tt.forkedAt) {
			t.Errorf("%s: parent %q at %d, want %q at %d", tt.header, d.Info.Parent, d.Info.ForkedAt, tt.parent, tt.forkedAt)
		}
	}
}

// FuzzUnquote: the scanner's unquote decodes every valid string token as
// encoding/json does (escapes, surrogate pairs and lone surrogates,
// invalid UTF-8).
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{``, `plain`, `tab\there`, `\u00e9\u00E9`, `\ud83d\ude80`, `\ud83d`, `\ud83dx`, `\ude80\ud83d`, `\ud83d\u0041`,
		"\xff\xfe é", `\"\\\/\b\f\n\r\t`, "é\\n\xc3", `\u0000`, `a\ud800\udc00b`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tok := append(append([]byte{'"'}, body...), '"')
		var want string
		if json.Unmarshal(tok, &want) != nil {
			return
		}
		if got := sessionlog.Unquote(tok); got != want {
			t.Fatalf("%q: unquote %q, encoding/json %q", tok, got, want)
		}
	})
}

// TestScanMessageText: the raw texts the scanner gives are what
// DecodeEntry decodes, and it leaves alone the lines it cannot read.
func TestScanMessageText(t *testing.T) {
	for _, l := range summaryLines {
		mt, ok := sessionlog.ScanMessageText([]byte(l))
		d := sessionlog.Decoder{Name: "f"}
		if _, _, err := d.DecodeLine([]byte(testHeader)); err != nil {
			t.Fatal(err)
		}
		e, isMsg, err := d.DecodeEntry([]byte(l))
		if !ok {
			continue
		}
		if err != nil || !isMsg {
			t.Fatalf("%s: scanned, but DecodeEntry: %v", l, err)
		}
		if !mt.TS.Equal(e.TS) || mt.Role != e.Message.Role || len(mt.Blocks) != len(e.Message.Content) {
			t.Fatalf("%s: scanned %+v, decoded %+v", l, mt, e)
		}
		for i, b := range mt.Blocks {
			want := e.Message.Content[i]
			if b.Type != want.Type || sessionlog.Unquote(b.Text) != want.Text || sessionlog.Unquote(b.Name) != want.ToolName || !bytes.Equal(b.Input, want.Input) {
				t.Errorf("%s: block %d scanned %+v, decoded %+v", l, i, b, want)
			}
		}
	}
	mt, ok := sessionlog.ScanMessageText([]byte(`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"tool_use","tool_use_id":"t","name":"run","input":{"cmd":"ls \"a b\"","n":[1, 2]}}]}`))
	if !ok || string(mt.Blocks[0].Input) != `{"cmd":"ls \"a b\"","n":[1, 2]}` || sessionlog.Unquote(mt.Blocks[0].Name) != "run" {
		t.Errorf("tool use scanned %+v, %v", mt, ok)
	}
}
