package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

func TestInteractiveCompact(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, b backend, pc providerCase) {
		srv := fakeprovider.New(t, pc.style, pc.key,
			fakeprovider.Reply{Text: "Paris is the capital."},
			fakeprovider.Reply{Text: "User asked about the capital of France: Paris."},
			fakeprovider.Reply{Text: "About 2 million people."},
		)
		input := "what is the capital of France?\n/compact\nhow many live there?\n/quit\n"
		r := runPanto(t, t.TempDir(), pc.env(b), input, append(pc.flags(srv), "-i")...)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
		}
		for _, want := range []string{"Paris is the capital.", "compacted", "User asked about the capital of France: Paris.", "About 2 million people."} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		reqs := srv.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d requests", len(reqs))
		}
		if !strings.Contains(reqs[1].LastUserText(), "Summarise the conversation") {
			t.Errorf("compaction request = %s", reqs[1].Body)
		}
		// After the compaction the provider sees the summary, not the
		// original exchange.
		last := string(reqs[2].Body)
		if strings.Contains(last, "what is the capital of France?") || !strings.Contains(last, "User asked about the capital of France: Paris.") || !strings.Contains(last, "how many live there?") {
			t.Errorf("request after /compact: %s", last)
		}
		_, conv := loadOnly(t, b)
		if got := roles(conv.Messages); got != "user,assistant,summary,user,assistant" {
			t.Fatalf("stored roles %s", got)
		}
		if conv.LatestCompaction() != 2 || len(conv.Context()) != 3 {
			t.Errorf("compaction %d, context %d", conv.LatestCompaction(), len(conv.Context()))
		}
		checkNoKey(t, b, pc.key)
	})
}

func TestInteractiveCommands(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	input := "/help\n/compact\nfirst session prompt\n/new\nsecond session prompt\n/sessions\n/bogus\n"
	r := runPanto(t, t.TempDir(), pc.env(b), input, append(pc.flags(srv), "-i")...)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
	}
	for _, want := range []string{"/compact [INSTRUCTIONS]", "nothing to compact yet", "reply 1", "new session ", "reply 2", "LAST PROMPT", "first session prompt", "second session prompt"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "unknown command /bogus") {
		t.Errorf("stderr %q", r.stderr)
	}
	list, err := b.open(t).List(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("sessions %+v, %v", list, err)
	}
	// Resuming shows the last exchange before the prompt.
	r = runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "-i", "-c", "--any")...)
	if r.code != 0 || !strings.Contains(r.stdout, "Last exchange:") || !strings.Contains(r.stdout, "second session prompt") || !strings.Contains(r.stdout, "reply 2") || !strings.Contains(r.stdout, "session "+list[0].ID) {
		t.Errorf("resume banner: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestInteractiveRetry: a prompt left without an answer (the provider
// failed) is sent again by Enter alone, in the run that failed and in
// the next one, whose banner says so; it is stored once. Enter does
// nothing once the prompt is answered.
func TestInteractiveRetry(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key,
		fakeprovider.Reply{Status: http.StatusBadRequest},
		fakeprovider.Reply{Text: "answered at last"},
		fakeprovider.Reply{Status: http.StatusBadRequest},
		fakeprovider.Reply{Text: "answered in the next run"})
	dir := t.TempDir()
	r := runPanto(t, dir, pc.env(b), "a question\n\n\n", append(pc.flags(srv), "-i")...)
	if r.code != 0 || !strings.Contains(r.stderr, "(Enter sends the prompt again)") || !strings.Contains(r.stdout, "answered at last") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2 (the last Enter has nothing to send)", n)
	}
	r = runPanto(t, dir, pc.env(b), "another\n", append(pc.flags(srv), "-i", "-c")...)
	if r.code != 0 || strings.Contains(r.stdout, "answered in") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runPanto(t, dir, pc.env(b), "\n", append(pc.flags(srv), "-i", "-c")...)
	if r.code != 0 || !strings.Contains(r.stdout, "The last prompt has no answer: press Enter to send it again") || !strings.Contains(r.stdout, "answered in the next run") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	_, conv := loadOnly(t, b)
	if got := roles(conv.Messages); got != "user,assistant,user,assistant" {
		t.Errorf("stored %s, want each prompt once", got)
	}
}

// TestInteractiveCancel interrupts a reply in flight: the step is
// cancelled, the prompt stays stored, and the session goes on.
func TestInteractiveCancel(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[1]
	srv := fakeprovider.New(t, pc.style, pc.key)
	arrived := make(chan struct{}, 4)
	release := make(chan struct{})
	first := true
	var mu sync.Mutex
	srv.SetBefore(func(r *http.Request) {
		mu.Lock()
		hang := first
		first = false
		mu.Unlock()
		arrived <- struct{}{}
		if hang {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	})
	defer close(release)

	cmd := pantoCmd(t, t.TempDir(), pc.env(b), append(pc.flags(srv), "-i")...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmdtest.Stderr(t, "panto", &stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out <- sc.Text()
		}
		close(out)
	}()
	io.WriteString(stdin, "a slow question\n")
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the request never arrived")
	}
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "a quick one\n")
	var lines []string
	deadline := time.After(20 * time.Second)
wait:
	for {
		select {
		case l, ok := <-out:
			if !ok {
				break wait
			}
			lines = append(lines, l)
			if strings.Contains(l, "reply") {
				break wait
			}
		case <-deadline:
			t.Fatalf("no reply after the cancel; stdout %q, stderr %q", lines, stderr.String())
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("panto: %v; stderr %s", err, stderr.String())
	}
	// Nothing had streamed and no tool ran: the notice says what is kept,
	// and of no tool call.
	if !strings.Contains(stderr.String(), "cancelled: the prompt is stored\n") {
		t.Errorf("stderr %q does not report the cancel as it was", stderr.String())
	}
	_, conv := loadOnly(t, b)
	if got := roles(conv.Messages); got != "user,user,assistant" {
		t.Errorf("stored roles %s (%+v)", got, conv.Messages)
	}
	if conv.Messages[0].Text() != "a slow question" {
		t.Errorf("the cancelled prompt was not kept: %+v", conv.Messages[0])
	}
}

// TestInteractiveTitleAndFork: /title names the session (and shows the
// name); /fork N goes on in a new session holding the first N messages,
// linked to the one it came from, which is left as it was.
func TestInteractiveTitleAndFork(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key)
			input := "/title\n/title  Chat   about X \n/title\nhello\n/fork 3\nin the fork\n/fork 99\n/quit\n"
			r := runPanto(t, t.TempDir(), pc.env(b), input, append(pc.flags(srv), "-i")...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
			}
			for _, want := range []string{"no title yet", "title: Chat about X\n", "forked: now in session ", "the first 3 messages of ", "reply 2"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
				}
			}
			if !strings.Contains(r.stderr, "error: the session holds 5 messages") && !strings.Contains(r.stderr, "holds 5 messages") {
				t.Errorf("/fork 99: stderr %q", r.stderr)
			}
			list, err := b.open(t).List(context.Background())
			if err != nil || len(list) != 2 {
				t.Fatalf("sessions %+v, %v", list, err)
			}
			fork, parent := list[0], list[1]
			if fork.Parent != parent.ID || fork.ForkedAt != 3 || fork.MessageCount != 5 || fork.Title != "Chat about X" || fork.LastUserMessage != "in the fork" {
				t.Errorf("fork %+v", fork)
			}
			if parent.MessageCount != 3 || parent.Title != "Chat about X" || parent.LastUserMessage != "hello" {
				t.Errorf("parent %+v", parent)
			}
			// The fork's second turn sent the parent's first.
			if body := string(srv.Requests()[1].Body); !strings.Contains(body, "hello") || !strings.Contains(body, "in the fork") {
				t.Errorf("the turn in the fork sent %s", body)
			}
		})
	}
}
