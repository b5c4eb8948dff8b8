package main

import "fmt"

// Action is what sync does with one session.
type Action string

const (
	// ActionSame: both sides hold the same bytes.
	ActionSame Action = "same"
	// ActionPushNew: the session exists only locally.
	ActionPushNew Action = "push-new"
	// ActionPushTail: the remote is a prefix of the local file; push
	// uploads local[R:L] as one new segment.
	ActionPushTail Action = "push-tail"
	// ActionPullNew: the session exists only remotely.
	ActionPullNew Action = "pull-new"
	// ActionPullTail: the local file is a prefix of the remote; pull
	// appends remote[L:R] to it.
	ActionPullTail Action = "pull-tail"
	// ActionDiverged: neither side is a prefix of the other.
	ActionDiverged Action = "diverged"
)

// Side is what one side (the local file or the remote session) holds:
// the length of its committed bytes and their sha256, hex.
type Side struct {
	Exists bool
	Length int64
	SHA256 string
}

// PrefixCheck answers whether the shorter side's bytes are a prefix of
// the longer side's. It is only asked when both sides exist and their
// lengths differ, so that an equal-length or one-sided session costs
// no extra request or read.
type PrefixCheck func() (bool, error)

// Plan decides what to do with a session from what each side holds. It
// is the whole sync decision and does no I/O itself: isPrefix does any
// that is needed.
func Plan(local, remote Side, isPrefix PrefixCheck) (Action, error) {
	switch {
	case !local.Exists && !remote.Exists:
		return "", fmt.Errorf("plan: the session exists on neither side")
	case !remote.Exists:
		return ActionPushNew, nil
	case !local.Exists:
		return ActionPullNew, nil
	case local.Length == remote.Length:
		if local.SHA256 == remote.SHA256 {
			return ActionSame, nil
		}
		return ActionDiverged, nil
	}
	ok, err := isPrefix()
	if err != nil {
		return "", err
	}
	switch {
	case !ok:
		return ActionDiverged, nil
	case local.Length > remote.Length:
		return ActionPushTail, nil
	default:
		return ActionPullTail, nil
	}
}

// Pushes reports whether a push acts on a session with this plan.
func (a Action) Pushes() bool { return a == ActionPushNew || a == ActionPushTail }

// Pulls reports whether a pull acts on a session with this plan.
func (a Action) Pulls() bool { return a == ActionPullNew || a == ActionPullTail }
