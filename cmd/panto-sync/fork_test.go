package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

func TestForkLog(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first, err := sessionlog.EncodeBatch("orig", true, []agent.PersistentMessage{{Message: agent.UserText("hello")}}, at)
	if err != nil {
		t.Fatal(err)
	}
	second, err := sessionlog.EncodeBatch("orig", false, []agent.PersistentMessage{
		{Message: agent.AssistantText("hi <there> & \"you\"")}, {Message: agent.UserText("again")},
	}, at.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	log := append(first, second...)
	out, err := forkLog(log, "copy", "orig")
	if err != nil {
		t.Fatal(err)
	}
	want, err := sessionlog.Parse("orig", log)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sessionlog.Parse("copy", out)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.ID != "copy" || !got.Header.Created.Equal(want.Header.Created) || got.Header.More != want.Header.More {
		t.Errorf("header = %+v, want id copy and the rest of %+v", got.Header, want.Header)
	}
	if !reflect.DeepEqual(got.Messages, want.Messages) {
		t.Errorf("messages changed:\n got %+v\nwant %+v", got.Messages, want.Messages)
	}
	// Every line but the header is kept byte for byte.
	if !bytes.Equal(out[bytes.IndexByte(out, '\n'):], log[bytes.IndexByte(log, '\n'):]) {
		t.Error("lines after the header changed")
	}
	var link struct {
		ForkedFrom string `json:"forked_from"`
	}
	if err := json.Unmarshal(out[:bytes.IndexByte(out, '\n')], &link); err != nil || link.ForkedFrom != "orig" {
		t.Errorf("forked_from = %q (%v), want orig", link.ForkedFrom, err)
	}
}

func TestForkLogRefusesNonLogs(t *testing.T) {
	for _, in := range []string{"", "no newline", "{\"type\":\"message\"}\n", "not json\n"} {
		if _, err := forkLog([]byte(in), "copy", "orig"); err == nil {
			t.Errorf("forkLog(%q): no error", in)
		}
	}
}

func FuzzForkLog(f *testing.F) {
	b, _ := sessionlog.EncodeBatch("orig", true, []agent.PersistentMessage{{Message: agent.UserText("hi")}}, time.Unix(0, 0))
	f.Add(b)
	f.Add([]byte("{\"type\":\"session\",\"version\":1,\"id\":\"x\",\"created\":\"2026-01-01T00:00:00Z\"}\n"))
	f.Add([]byte("{\"type\":\"session\"}\nnot json\n"))
	f.Fuzz(func(t *testing.T, log []byte) {
		out, err := forkLog(log, "copy", "orig")
		if err != nil {
			return
		}
		// Whatever it accepts reads back as session copy, with every line
		// after the header unchanged.
		l, err := sessionlog.Parse("copy", out)
		if err != nil || l == nil || l.Header.ID != "copy" || l.Committed != len(out) {
			t.Fatalf("forkLog output does not parse as session copy: %v", err)
		}
		if !bytes.Equal(out[bytes.IndexByte(out, '\n'):], log[bytes.IndexByte(log, '\n'):]) {
			t.Fatal("lines after the header changed")
		}
	})
}
