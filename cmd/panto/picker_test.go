package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gdamore/tcell/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

var pickerList = []agent.SessionInfo{
	{ID: "cccccccc000000000000000000000003", LastUserMessage: "ccc the newest prompt", Model: "model-c"},
	{ID: "bbbbbbbb000000000000000000000002", Title: "bbb has a title", LastUserMessage: "not shown", Model: "model-b"},
	{ID: "aaaaaaaa000000000000000000000001", LastUserMessage: "aaa the oldest prompt", Model: "model-a"},
}

// simulate runs the picker on a simulated screen, types keys once it is
// drawn, and returns what it picked and what the screen showed before
// the last key.
func simulate(t *testing.T, keys ...tcell.Key) (string, error, string) {
	t.Helper()
	return simulateOn(t, pickerList, 100, keys...)
}

// simulateOn is simulate with the list and a screen width.
func simulateOn(t *testing.T, list []agent.SessionInfo, width int, keys ...tcell.Key) (string, error, string) {
	t.Helper()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	list = append([]agent.SessionInfo(nil), list...)
	for i := range list {
		list[i].Modified = now.Add(-time.Duration(i+1) * 3 * time.Hour)
	}
	screen := tcell.NewSimulationScreen("UTF-8")
	screen.SetSize(width, 20)
	type outcome struct {
		id  string
		err error
	}
	done := make(chan outcome, 1)
	p := newPicker(list, now)
	p.app.SetScreen(screen)   // here: it initialises the screen, which is not safe to read meanwhile
	screen.SetSize(width, 20) // after: Init sets the simulation's default, 80 by 25
	go func() {
		id, err := p.run(nil)
		done <- outcome{id, err}
	}()
	// The screen is read in the picker's event loop, which also draws it
	// (GetContents hands out the cells it draws in).
	text := func() string {
		var b strings.Builder
		p.app.QueueUpdate(func() {
			cells, w, _ := screen.GetContents()
			for i, c := range cells {
				if i > 0 && i%w == 0 {
					b.WriteByte('\n')
				}
				if len(c.Runes) > 0 {
					b.WriteRune(c.Runes[0])
				} else {
					b.WriteByte(' ')
				}
			}
		})
		return b.String()
	}
	waitFor(t, func() bool { return strings.Contains(text(), "resume ›") })
	var shown string
	for i, k := range keys {
		if i == len(keys)-1 {
			time.Sleep(50 * time.Millisecond) // let the screen draw the keys before
			shown = text()
		}
		screen.InjectKey(k, 0, tcell.ModNone)
	}
	select {
	case o := <-done:
		return o.id, o.err, shown
	case <-time.After(10 * time.Second):
		t.Fatal("the picker did not close")
		return "", nil, ""
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPickerKeys(t *testing.T) {
	// Enter takes the newest; Down moves the selection.
	id, err, shown := simulate(t, tcell.KeyEnter)
	if err != nil || id != pickerList[0].ID {
		t.Errorf("Enter: %q, %v", id, err)
	}
	for _, w := range []string{"ccc the newest prompt", "bbb has a title", "aaa the oldest prompt", "model-b", "3h", "6h", "3 of 3 sessions"} {
		if !strings.Contains(shown, w) {
			t.Errorf("the picker does not show %q:\n%s", w, shown)
		}
	}
	if strings.Contains(shown, "not shown") {
		t.Error("the picker shows the last prompt of a titled session")
	}
	if id, err, _ := simulate(t, tcell.KeyDown, tcell.KeyDown, tcell.KeyUp, tcell.KeyEnter); err != nil || id != pickerList[1].ID {
		t.Errorf("Down Down Up Enter: %q, %v", id, err)
	}
	if _, err, _ := simulate(t, tcell.KeyEscape); !errors.Is(err, errNoPick) {
		t.Errorf("Esc: %v", err)
	}
}

// TestPickerNarrow: on a narrow terminal every row still shows its
// session's id, which tells apart sessions of the same headline: the id
// was the last column, the first cut off.
func TestPickerNarrow(t *testing.T) {
	prompt := "fix the failing upload test in the storage package, then rerun it"
	list := []agent.SessionInfo{
		{ID: "dddddddd000000000000000000000002", LastUserMessage: prompt, Model: "model-d"},
		{ID: "eeeeeeee000000000000000000000001", LastUserMessage: prompt, Model: "model-d"},
	}
	_, _, shown := simulateOn(t, list, 50, tcell.KeyEscape)
	for _, id := range []string{"dddddddd", "eeeeeeee"} {
		if !strings.Contains(shown, id) {
			t.Errorf("the picker 50 columns wide does not show %s:\n%s", id, shown)
		}
	}
}

func TestFilterSessions(t *testing.T) {
	tests := []struct {
		filter string
		want   []string
	}{
		{"", []string{"c", "b", "a"}},
		{"THE", []string{"c", "a"}},
		{"the oldest", []string{"a"}},
		{"title", []string{"b"}},    // the title
		{"shown", []string{"b"}},    // the last prompt, shown or not
		{"model-b", []string{"b"}},  // the model
		{"bbbbbbbb", []string{"b"}}, // the id
		{"zzz", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, s := range filterSessions(pickerList, tt.filter) {
			got = append(got, s.ID[:1])
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("filter %q: %v, want %v", tt.filter, got, tt.want)
		}
	}
}

// TestResumePicker: panto -r on a terminal (a pseudo-terminal here)
// lists the sessions, the typed text filters them, and Enter resumes the
// one left; off a terminal, -r without an id is an error that says to
// pass one.
func TestResumePicker(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) { testResumePicker(t, kind.make(t)) })
	}
}

func testResumePicker(t *testing.T, b backend) {
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	// The first session is of the project the picker runs in: it is
	// listed first, above the newer sessions of other projects.
	here := t.TempDir()
	var ids []string
	for i, p := range []string{"first about apples", "second about bananas", "third about cherries"} {
		dir := t.TempDir()
		if i == 0 {
			dir = here
		}
		r := runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), p)...)
		m := sessionLine.FindStringSubmatch(r.stderr)
		if r.code != 0 || m == nil {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		ids = append(ids, m[1])
	}

	cmd := pantoCmd(t, here, append(pc.env(b), "TERM=xterm-256color"), append(pc.flags(srv), "-r")...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out := &lockedBuffer{}
	go func() { _, _ = io.Copy(out, tty) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()

	waitOut := func(want string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for !strings.Contains(out.String(), want) {
			select {
			case err := <-exited:
				t.Fatalf("panto exited (%v) before showing %q:\n%q", err, want, out.String())
			case <-deadline:
				t.Fatalf("panto did not show %q:\n%q", want, out.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitOut("3 of 3 sessions")
	if shown := out.String(); strings.Index(shown, "first about apples") > strings.Index(shown, "third about cherries") {
		t.Errorf("the picker does not list this project's session first:\n%q", shown)
	}
	// The screen is redrawn where it changed, so what the filter leaves
	// shows in pieces: wait until the redraw of the typed text is done.
	// Enter then resumes the one session left; without the filter it
	// would resume the newest.
	drawn := len(out.String())
	io.WriteString(tty, "banan")
	waitFor(t, func() bool { return len(out.String()) > drawn })
	for n := -1; n != len(out.String()); {
		n = len(out.String())
		time.Sleep(200 * time.Millisecond)
	}
	io.WriteString(tty, "\r")
	waitOut("panto · session " + ids[1])
	waitOut("second about bananas") // the last exchange of the resumed session
	io.WriteString(tty, "/quit\r")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("panto: %v\n%q", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("panto did not exit after /quit:\n%q", out.String())
	}

	r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "-r")...)
	if r.code == 0 || !strings.Contains(r.stderr, "pass -r ID") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("-r off a terminal: exit %d, stderr %q", r.code, r.stderr)
	}
}

// lockedBuffer is a bytes.Buffer for one writer and one reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
