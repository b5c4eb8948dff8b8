package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
)

// This file is panto -r's session picker: the recent sessions, filtered as
// one types, Enter to resume. tview draws it (through tcell), so that
// panto holds no terminal code of its own: key decoding, resizes, wide
// characters and restoring the terminal are a well-kept library's.

// errNoPick: the picker was closed without a choice.
var errNoPick = errors.New("no session picked (Esc): pass -r ID to resume one, or run panto without -r for a new one")

// pickSession lists the sessions of st, those of project here first, each
// newest first, and returns the id of the one picked; a listing that is
// incomplete (a damaged catalog) is offered as it is, warn saying so.
// screen is nil but in tests (the terminal).
func pickSession(ctx context.Context, st agent.SessionStore, here project.Found, warn io.Writer, screen tcell.Screen) (string, error) {
	list, err := st.List(ctx)
	switch {
	case errors.Is(err, agent.ErrIncompleteList) && len(list) > 0:
		fmt.Fprintf(warn, "panto: warning: %s\n", oneLine(err.Error()))
	case err != nil:
		return "", fmt.Errorf("list sessions: %w", err)
	}
	if len(list) == 0 {
		return "", errors.New("no session to resume in this store yet: run panto without -r to start one")
	}
	return newPicker(projectFirst(list, here), time.Now()).run(screen)
}

// picker is the list and its filter.
type picker struct {
	all    []agent.SessionInfo
	shown  []agent.SessionInfo
	now    time.Time
	app    *tview.Application
	input  *tview.InputField
	table  *tview.Table
	status *tview.TextView
	picked string
}

func newPicker(list []agent.SessionInfo, now time.Time) *picker {
	p := &picker{all: list, now: now, app: tview.NewApplication()}
	p.input = tview.NewInputField().SetLabel("resume › ").SetFieldWidth(0)
	p.input.SetFieldBackgroundColor(tcell.ColorDefault)
	p.table = tview.NewTable().SetSelectable(true, false)
	p.status = tview.NewTextView()
	p.input.SetChangedFunc(p.filter)
	p.input.SetInputCapture(p.key)
	root := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(p.input, 1, 0, true).
		AddItem(p.table, 0, 1, false).
		AddItem(p.status, 1, 0, false)
	p.app.SetRoot(root, true).SetFocus(p.input)
	p.filter("")
	return p
}

func (p *picker) run(screen tcell.Screen) (string, error) {
	if screen != nil {
		p.app.SetScreen(screen)
	}
	if err := p.app.Run(); err != nil {
		return "", fmt.Errorf("session picker: %w", err)
	}
	if p.picked == "" {
		return "", errNoPick
	}
	return p.picked, nil
}

// key handles the keys that act on the list while the filter has the
// focus; any other key edits the filter.
func (p *picker) key(ev *tcell.EventKey) *tcell.EventKey {
	row, _ := p.table.GetSelection()
	switch ev.Key() {
	case tcell.KeyUp, tcell.KeyCtrlP:
		p.table.Select(max(row-1, 0), 0)
	case tcell.KeyDown, tcell.KeyCtrlN:
		p.table.Select(min(row+1, max(len(p.shown)-1, 0)), 0)
	case tcell.KeyEnter:
		if row >= 0 && row < len(p.shown) {
			p.picked = p.shown[row].ID
			p.app.Stop()
		}
	case tcell.KeyEscape, tcell.KeyCtrlC:
		p.app.Stop()
	default:
		return ev
	}
	return nil
}

// filter shows the sessions that hold every word of text (in their title,
// last prompt, model, project or id, case-insensitively), in the list's
// order, the first one selected.
func (p *picker) filter(text string) {
	p.shown = filterSessions(p.all, text)
	p.table.Clear()
	// The id comes first, as in panto sessions: a narrow terminal cuts
	// the columns on the right, and the id is what tells apart two
	// sessions of the same headline.
	for i, s := range p.shown {
		p.table.SetCell(i, 0, tview.NewTableCell(shortID(s.ID)).SetTextColor(tcell.ColorGray))
		p.table.SetCell(i, 1, tview.NewTableCell(clip(headline(s), 200)).SetExpansion(1).SetMaxWidth(0))
		p.table.SetCell(i, 2, tview.NewTableCell(age(p.now, s.Modified)).SetAlign(tview.AlignRight))
		p.table.SetCell(i, 3, tview.NewTableCell(s.Model))
		p.table.SetCell(i, 4, tview.NewTableCell(shortProjectName(s.Project)).SetTextColor(tcell.ColorGray))
	}
	p.table.Select(0, 0)
	p.table.ScrollToBeginning()
	p.status.SetText(fmt.Sprintf("%d of %d sessions · ↑↓ choose · Enter resume · Esc cancel", len(p.shown), len(p.all)))
}

func filterSessions(all []agent.SessionInfo, text string) []agent.SessionInfo {
	words := strings.Fields(strings.ToLower(text))
	var out []agent.SessionInfo
	for _, s := range all {
		hay := strings.ToLower(strings.Join([]string{s.Title, s.LastUserMessage, s.Model, s.Project.Key(), s.ID}, "\n"))
		ok := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// age says how long ago t was, in the largest unit: 5s, 3m, 2h, 4d, 6w.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d < 14*24*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	return fmt.Sprintf("%dw", int(d.Hours()/24/7))
}
