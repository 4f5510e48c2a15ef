package namespace

import (
	"fmt"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Gate is the directory-lock check a mutation passes before it applies
// (SPEC §6, what a lock covers). Every gate first checks the fences the
// mutation carries: a client that lost a lock hears STALE_EPOCH, whoever
// holds the directory now.
type Gate int

const (
	// gateUnset is a description that forgot its gate: refused.
	gateUnset Gate = iota
	// GateTarget: no directory at or above the one path may be locked by
	// another session or be cleaning.
	GateTarget
	// GateSubtree is GateTarget, and the same below the path: a recursive
	// delete, which takes every lock below with it.
	GateSubtree
	// GateMove checks two paths, a move's source and destination: the
	// destination passes GateTarget; so does the source, and besides no
	// lock at or below it may exist at all, not even the session's own
	// (a lock never moves: dirlock.Table.CheckMove).
	GateMove
	// GateNone checks the fences only. A command described with it says
	// why it needs no lock check.
	GateNone
)

func (g Gate) String() string {
	switch g {
	case GateTarget:
		return "target"
	case GateSubtree:
		return "subtree"
	case GateMove:
		return "move"
	case GateNone:
		return "none"
	}
	return fmt.Sprintf("Gate(%d)", int(g))
}

// check runs g over paths for session with fences. Apply runs it under
// the command's path locks, so no lock transition slips in between the
// check and the commit.
func (g Gate) check(locks *dirlock.Table, paths []string, session dirlock.SessionID, fences []*bfspb.Fence) error {
	if len(fences) > 0 {
		if err := locks.CheckFences(paths, session, toFences(fences)); err != nil {
			return err
		}
	}
	switch g {
	case GateNone:
		return nil
	case GateTarget:
		if len(paths) == 1 {
			return locks.Check(paths[0], session)
		}
	case GateSubtree:
		if len(paths) == 1 {
			return locks.CheckSubtree(paths[0], session)
		}
	case GateMove:
		if len(paths) == 2 {
			if err := locks.CheckMove(paths[0], session); err != nil {
				return err
			}
			return locks.Check(paths[1], session)
		}
	}
	return fmt.Errorf("%w: no lock check %v of %d paths", ErrInvalid, g, len(paths))
}

// guard is the lock check of a command, as its description says.
func (s *Store) guard(o op) error {
	return o.d.gate.check(s.locks, o.paths(), dirlock.SessionID(o.session()), o.cmd.Fences)
}

// Gate runs gate g over paths (normalized) for session, with the fences
// the request carried, as Apply runs a command's gate: for a request of
// a writer that is not applied as one command (FinishFile, a retried
// AddBlock). Unlike Apply's, this check is not atomic with what the
// caller does next; what follows it must be something locks drain rather
// than stop (the nameserver's own close of a file).
func (s *Store) Gate(g Gate, paths []string, session string, fences []*bfspb.Fence) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := validate(paths, fences); err != nil {
		return err
	}
	return g.check(s.locks, paths, dirlock.SessionID(session), fences)
}

// toFences converts fences from the wire.
func toFences(in []*bfspb.Fence) []dirlock.Fence {
	out := make([]dirlock.Fence, len(in))
	for i, f := range in {
		out[i] = dirlock.Fence{Path: f.Path, Epoch: dirlock.Epoch(f.Epoch)}
	}
	return out
}

// validate refuses paths and fences that are not normalized, so nothing
// unnormalized reaches a lock check or the apply step, whoever built the
// command.
func validate(paths []string, fences []*bfspb.Fence) error {
	for _, p := range paths {
		if c, err := fspath.Clean(p); err != nil || c != p {
			return fmt.Errorf("%w: path %q is not normalized", ErrInvalid, p)
		}
	}
	for _, f := range fences {
		if c, err := fspath.Clean(f.Path); err != nil || c != f.Path || f.Epoch == 0 {
			return fmt.Errorf("%w: fence %q at epoch %d", ErrInvalid, f.Path, f.Epoch)
		}
	}
	return nil
}
