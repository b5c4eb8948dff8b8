package sessionlog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

var at = time.Date(2026, 2, 3, 4, 5, 6, 789, time.UTC)

var ident = agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://x.test/v1", Model: "m1", Reasoning: agent.ReasoningLow}

func pms(texts ...string) []agent.PersistentMessage {
	out := make([]agent.PersistentMessage, len(texts))
	for i, t := range texts {
		out[i] = agent.PersistentMessage{Message: agent.UserText(t), Identity: ident}
	}
	return out
}

func encode(t testing.TB, id string, header bool, msgs []agent.PersistentMessage) []byte {
	t.Helper()
	b, err := sessionlog.EncodeBatch(id, header, msgs, at)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// twoBatches is a log of a 2-message first batch and a 3-message second.
func twoBatches(t testing.TB) (log []byte, boundaries []int) {
	b1 := encode(t, "s1", true, pms("a", "b"))
	b2 := encode(t, "s1", false, pms("c", "d", "e"))
	return append(append([]byte{}, b1...), b2...), []int{0, len(b1), len(b1) + len(b2)}
}

// TestCommittedLengthEveryCut cuts a log at every byte: what is committed
// is always the last whole batch before the cut, never part of one.
func TestCommittedLengthEveryCut(t *testing.T) {
	log, bounds := twoBatches(t)
	for cut := 0; cut <= len(log); cut++ {
		want := 0
		for _, b := range bounds {
			if b <= cut {
				want = b
			}
		}
		got, err := sessionlog.CommittedLength("s1.jsonl", log[:cut])
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if got != want {
			t.Fatalf("cut at %d: committed %d, want %d", cut, got, want)
		}
		parsed, err := sessionlog.Parse("s1.jsonl", log[:cut])
		if err != nil {
			t.Fatalf("cut at %d: Parse: %v", cut, err)
		}
		n := 0
		if parsed != nil {
			n = len(parsed.Messages)
			if parsed.Committed != want {
				t.Fatalf("cut at %d: Parse committed %d, want %d", cut, parsed.Committed, want)
			}
		}
		wantMsgs := map[int]int{0: 0, bounds[1]: 2, bounds[2]: 5}[want]
		if n != wantMsgs {
			t.Fatalf("cut at %d: %d messages, want %d", cut, n, wantMsgs)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good, _ := twoBatches(t)
	lines := strings.SplitAfter(string(good), "\n") // 6 lines and a final ""
	replace := func(i int, line string) string {
		l := append([]string{}, lines...)
		l[i] = line
		return strings.Join(l, "")
	}
	cases := []struct {
		name string
		data string
		err  error
		line string // "name:line" the error must carry
	}{
		{"newer-version", strings.Replace(string(good), `"version":1`, `"version":2`, 1), sessionlog.ErrNewerVersion, "f.jsonl:1"},
		{"no-version", strings.Replace(string(good), `"version":1,`, ``, 1), sessionlog.ErrMalformed, "f.jsonl:1"},
		{"header-not-first", strings.Join(lines[1:], ""), sessionlog.ErrMalformed, "f.jsonl:1"},
		{"header-bad-id", strings.Replace(string(good), `"id":"s1"`, `"id":"../s1"`, 1), sessionlog.ErrMalformed, "f.jsonl:1"},
		{"not-json-mid-batch", replace(1, "garbage\n"), sessionlog.ErrMalformed, "f.jsonl:2"},
		{"bad-json-in-message", replace(3, `{"type":"message","role":"user","content":[{"type":1}],"more":2}`+"\n"), sessionlog.ErrMalformed, "f.jsonl:4"},
		{"unknown-role", replace(4, `{"type":"message","role":"robot","content":[],"more":1}`+"\n"), sessionlog.ErrMalformed, "f.jsonl:5"},
		{"unknown-type", replace(2, `{"type":"weird","more":0}`+"\n"), sessionlog.ErrMalformed, "f.jsonl:3"},
		{"second-header", replace(3, `{"type":"session","version":1,"id":"s1","created":"2026-01-01T00:00:00Z","more":2}`+"\n"), sessionlog.ErrMalformed, "f.jsonl:4"},
		{"empty-line", replace(1, "\n"), sessionlog.ErrMalformed, "f.jsonl:2"},
		{"negative-more", replace(5, `{"type":"message","role":"user","content":[],"more":-1}`+"\n"), sessionlog.ErrMalformed, "f.jsonl:6"},
		{"malformed-last-complete-line", string(good) + "{oops}\n", sessionlog.ErrMalformed, "f.jsonl:7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sessionlog.Parse("f.jsonl", []byte(c.data))
			if !errors.Is(err, c.err) {
				t.Fatalf("Parse = %v, want %v", err, c.err)
			}
			if !strings.Contains(err.Error(), c.line+":") {
				t.Errorf("error %q does not name %s", err, c.line)
			}
		})
	}
}

func TestParseIgnoresWhatIsNotCommitted(t *testing.T) {
	good, _ := twoBatches(t)
	cases := map[string]string{
		"torn-line":         `{"type":"message","ro`,
		"garbage-no-eol":    "\x00\x00\x00",
		"batch-never-ended": `{"type":"message","role":"user","content":[],"more":2}` + "\n" + `{"type":"message","role":"user","content":[],"more":1}` + "\n",
	}
	for name, tail := range cases {
		log, err := sessionlog.Parse("f.jsonl", append(append([]byte{}, good...), tail...))
		if err != nil || log == nil || len(log.Messages) != 5 || log.Committed != len(good) {
			t.Errorf("%s: Parse = %+v, %v; want the 5 committed messages", name, log, err)
		}
	}
	if log, err := sessionlog.Parse("f.jsonl", nil); log != nil || err != nil {
		t.Errorf("Parse(nil) = %v, %v; want nil, nil", log, err)
	}
}

func TestEncodeGolden(t *testing.T) {
	msgs := []agent.PersistentMessage{
		{Message: agent.SystemText("sys <b>&</b>", agent.SystemReplace), Identity: ident},
		{
			Message: agent.Message{
				Role: agent.RoleAssistant,
				Content: []agent.Block{
					{Type: agent.BlockThinking, Text: "hm", Signature: "sig"},
					{Type: agent.BlockRedactedThinking, Data: "EmwKAhgBEgy3va+/="},
					agent.ToolUseBlock("t1", "run", json.RawMessage(`{ "b": 1, "a": [true] }`)),
				},
				StopReason: "tool_use",
				Metadata:   map[string]any{"z": 1.5, "a": map[string]any{"y": nil, "b": "x"}},
			},
			Usage:          &agent.Usage{InputTokens: 3, OutputTokens: 4},
			Identity:       ident,
			Conversation:   []agent.Message{agent.UserText("provenance")},
			ToolsAvailable: []agent.ToolDecl{{Name: "run"}},
		},
		{Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("t1", "fail", true)}}, Identity: ident},
	}
	got := encode(t, "gold", true, msgs)
	want := `{"type":"session","version":1,"id":"gold","created":"2026-02-03T04:05:06.000000789Z","more":3}
{"type":"message","ts":"2026-02-03T04:05:06.000000789Z","role":"system","content":[{"type":"system","text":"sys <b>&</b>","mode":"replace"}],"more":2}
{"type":"message","ts":"2026-02-03T04:05:06.000000789Z","role":"assistant","content":[{"type":"thinking","text":"hm","signature":"sig"},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va+/="},{"type":"tool_use","tool_use_id":"t1","name":"run","input":{"b":1,"a":[true]}}],"usage":{"input_tokens":3,"output_tokens":4},"stop_reason":"tool_use","metadata":{"a":{"b":"x","y":null},"z":1.5},"api_style":"openai-chat","base_url":"http://x.test/v1","model":"m1","reasoning":"low","more":1}
{"type":"message","ts":"2026-02-03T04:05:06.000000789Z","role":"user","content":[{"type":"tool_result","text":"fail","tool_use_id":"t1","is_error":true}],"api_style":"openai-chat","base_url":"http://x.test/v1","model":"m1","reasoning":"low"}
`
	if string(got) != want {
		t.Errorf("EncodeBatch =\n%s\nwant\n%s", got, want)
	}
	for range 5 { // map iteration order must not leak into the bytes
		if again := encode(t, "gold", true, msgs); !bytes.Equal(again, got) {
			t.Fatal("EncodeBatch is not deterministic")
		}
	}
	// A non-UTC clock encodes the same instant the same way.
	local, err := sessionlog.EncodeBatch("gold", true, msgs, at.In(time.FixedZone("X", 3600)))
	if err != nil || !bytes.Equal(local, got) {
		t.Errorf("EncodeBatch in another zone differs: %v", err)
	}
}

// TestStopReasonAndRedactedThinkingRoundTrip: every stop reason of both
// wires (and one no wire sends yet) comes back as it was written, with a
// redacted thinking block's data, and a line written before stop reasons
// were kept still decodes, to no reason.
func TestStopReasonAndRedactedThinkingRoundTrip(t *testing.T) {
	reasons := []agent.StopReason{
		"stop", "length", "tool_calls", "content_filter",
		"end_turn", "max_tokens", "tool_use", "stop_sequence", "pause_turn", "refusal",
		"a_reason_from_the_future", "",
	}
	for _, reason := range reasons {
		t.Run(string(reason), func(t *testing.T) {
			m := agent.Message{Role: agent.RoleAssistant, StopReason: reason, Content: []agent.Block{
				{Type: agent.BlockRedactedThinking, Data: "opaque+/=" + string(reason)},
				agent.TextBlock("partial answ"),
			}}
			data := encode(t, "s", true, []agent.PersistentMessage{{Message: m, Identity: ident}})
			if got := bytes.Contains(data, []byte(`"stop_reason"`)); got != (reason != "") {
				t.Errorf("line has a stop_reason key: %v, want %v:\n%s", got, reason != "", data)
			}
			log, err := sessionlog.Parse("s.jsonl", data)
			if err != nil {
				t.Fatal(err)
			}
			got := log.Messages[0]
			if got.StopReason != reason || !reflect.DeepEqual(got.Content, m.Content) {
				t.Errorf("decoded %+v, want %+v", got, m)
			}
		})
	}
	old := `{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","more":1}
{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"text","text":"hi"}],"model":"m"}
`
	log, err := sessionlog.Parse("old.jsonl", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if m := log.Messages[0]; m.StopReason != "" || m.StopReason.Kind() != agent.StopUnknown {
		t.Errorf("a line without a stop reason decodes to %q (%s)", m.StopReason, m.StopReason.Kind())
	}
}

func TestEncodeRefusesUnencodable(t *testing.T) {
	for name, v := range map[string]any{"chan": make(chan int), "func": func() {}, "complex": complex(1, 2)} {
		m := agent.UserText("x")
		m.Metadata = map[string]any{"v": v}
		if _, err := sessionlog.EncodeBatch("s", true, []agent.PersistentMessage{{Message: m}}, at); err == nil {
			t.Errorf("%s in metadata: EncodeBatch succeeded", name)
		}
	}
}

// TestDecoderResumes: a decoder saved as JSON at a batch boundary and
// resumed gives the same summary as one pass.
func TestDecoderResumes(t *testing.T) {
	log, bounds := twoBatches(t)
	full, err := sessionlog.Parse("f", log)
	if err != nil {
		t.Fatal(err)
	}
	d := sessionlog.Decoder{Name: "f"}
	decodeAll := func(d *sessionlog.Decoder, data []byte) {
		if err := sessionlog.Lines(data, func(l []byte) error { _, _, err := d.DecodeLine(l); return err }); err != nil {
			t.Fatal(err)
		}
	}
	decodeAll(&d, log[:bounds[1]])
	saved, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var resumed sessionlog.Decoder
	if err := json.Unmarshal(saved, &resumed); err != nil {
		t.Fatal(err)
	}
	decodeAll(&resumed, log[bounds[1]:])
	a, _ := json.Marshal(resumed.Info)
	b, _ := json.Marshal(full.Info)
	if !bytes.Equal(a, b) {
		t.Errorf("resumed info %s, want %s", a, b)
	}
	if resumed.Line != 6 || full.Info.MessageCount != 5 || full.Info.LastUserMessage != "e" || full.Info.Model != "m1" {
		t.Errorf("resumed at line %d; info %+v", resumed.Line, full.Info)
	}
}

func TestLines(t *testing.T) {
	var got []string
	sessionlog.Lines([]byte("a\n\nbc\ntorn"), func(l []byte) error { got = append(got, string(l)); return nil })
	if fmt.Sprint(got) != "[a  bc]" {
		t.Errorf("Lines = %q", got)
	}
	stop := errors.New("stop")
	if err := sessionlog.Lines([]byte("a\nb\n"), func([]byte) error { return stop }); err != stop {
		t.Errorf("Lines did not return fn's error: %v", err)
	}
}

// TestHeaderProject: the project a session was started in is recorded in
// its header only when the batch writes one, is folded into the summary
// by both decoding paths, and is absent from a log written without one.
func TestHeaderProject(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	msgs := []agent.PersistentMessage{{Message: agent.UserText("hi")}}
	for _, tt := range []struct {
		name    string
		project agent.Project
		want    string // in the header line
	}{
		{"in a clone", agent.Project{Remote: "host.test/team/proj", Root: "/src/proj", Path: "cmd", Dir: "/src/proj/cmd"},
			`"project":{"remote":"host.test/team/proj","root":"/src/proj","path":"cmd","dir":"/src/proj/cmd"},"more":1}`},
		{"a plain directory", agent.Project{Dir: "/tmp/x"}, `"project":{"dir":"/tmp/x"},"more":1}`},
		{"none", agent.Project{}, `"created":"2026-03-01T10:00:00Z","more":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first, err := sessionlog.EncodeBatchIn(tt.project, "s1", true, msgs, at)
			if err != nil {
				t.Fatal(err)
			}
			header, _, _ := strings.Cut(string(first), "\n")
			if !strings.HasSuffix(header, tt.want) {
				t.Errorf("header %s, want it to end in %s", header, tt.want)
			}
			next, err := sessionlog.EncodeBatchIn(tt.project, "s1", false, msgs, at)
			if err != nil || strings.Contains(string(next), "project") {
				t.Errorf("a batch without header: %s, %v", next, err)
			}
			log, err := sessionlog.Parse("s1", append(first, next...))
			if err != nil || log.Info.Project != tt.project || log.Header.Project != tt.project {
				t.Fatalf("Parse: %v, info %+v", err, log)
			}
			d := sessionlog.Decoder{Name: "s1"}
			if err := sessionlog.Lines(append(first, next...), func(line []byte) error {
				_, err := d.SummarizeLine(line)
				return err
			}); err != nil || d.Info != log.Info {
				t.Errorf("SummarizeLine: %v, %+v, want %+v", err, d.Info, log.Info)
			}
		})
	}
}
