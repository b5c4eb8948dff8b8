package main

import (
	"errors"
	"testing"
)

func TestPlan(t *testing.T) {
	none := Side{}
	short := Side{Exists: true, Length: 10, SHA256: "aa"}
	long := Side{Exists: true, Length: 20, SHA256: "bb"}
	otherShort := Side{Exists: true, Length: 10, SHA256: "cc"}
	yes := func() (bool, error) { return true, nil }
	no := func() (bool, error) { return false, nil }
	never := func() (bool, error) {
		t.Helper()
		t.Error("isPrefix asked for equal lengths or one side")
		return false, nil
	}
	tests := []struct {
		name          string
		local, remote Side
		isPrefix      PrefixCheck
		want          Action
	}{
		{"same", short, short, never, ActionSame},
		{"same length, other bytes", short, otherShort, never, ActionDiverged},
		{"only local", short, none, never, ActionPushNew},
		{"only remote", none, long, never, ActionPullNew},
		{"local extends remote", long, short, yes, ActionPushTail},
		{"remote extends local", short, long, yes, ActionPullTail},
		{"local longer, not an extension", long, short, no, ActionDiverged},
		{"remote longer, not an extension", short, long, no, ActionDiverged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.local, tt.remote, tt.isPrefix)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Plan = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := Plan(none, none, never); err == nil {
		t.Error("Plan of a session on neither side: no error")
	}
	boom := errors.New("boom")
	if _, err := Plan(short, long, func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("Plan with a failing prefix check = %v, want %v", err, boom)
	}
}

func TestActionDirections(t *testing.T) {
	for _, a := range []Action{ActionSame, ActionPushNew, ActionPushTail, ActionPullNew, ActionPullTail, ActionDiverged} {
		if a.Pushes() && a.Pulls() {
			t.Errorf("%s both pushes and pulls", a)
		}
	}
	if !ActionPushTail.Pushes() || !ActionPullNew.Pulls() || ActionDiverged.Pushes() || ActionSame.Pulls() {
		t.Error("Pushes/Pulls disagree with the action names")
	}
}
