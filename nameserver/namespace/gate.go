package namespace

import (
	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// guard is the lock check of every namespace mutation, run under the
// command's path locks so no lock transition can slip in between the check
// and the commit: the fences it carries (a client that lost a lock hears
// STALE_EPOCH, whoever holds the directory now), then the directory locks
// over (and for a recursive delete or a move, under) its paths.
func guard(locks *dirlock.Table, cmd *bfspb.Command) error {
	if len(cmd.Fences) > 0 {
		err := locks.CheckFences(commandPaths(cmd), dirlock.SessionID(commandSession(cmd)), Fences(cmd.Fences))
		if err != nil {
			return err
		}
	}
	return guardLocks(locks, cmd)
}

// Fences converts fences from the wire.
func Fences(in []*bfspb.Fence) []dirlock.Fence {
	out := make([]dirlock.Fence, len(in))
	for i, f := range in {
		out[i] = dirlock.Fence{Path: f.Path, Epoch: dirlock.Epoch(f.Epoch)}
	}
	return out
}

func guardLocks(locks *dirlock.Table, cmd *bfspb.Command) error {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_DeleteDir:
		return locks.CheckSubtree(op.DeleteDir.Path, dirlock.SessionID(op.DeleteDir.SessionId))
	case *bfspb.Command_Rename:
		sid := dirlock.SessionID(op.Rename.SessionId)
		if err := locks.CheckMove(op.Rename.Src, sid); err != nil {
			return err
		}
		return locks.Check(op.Rename.Dst, sid)
	case *bfspb.Command_Mkdir, *bfspb.Command_Create, *bfspb.Command_DeleteFile,
		*bfspb.Command_Chmod, *bfspb.Command_AddBlock, *bfspb.Command_SyncBlock:
		return locks.Check(commandPaths(cmd)[0], dirlock.SessionID(commandSession(cmd)))
	}
	// CloseFile is the nameserver closing a file (it drains locks rather
	// than being stopped by them); sessions and lock commands decide for
	// themselves.
	return nil
}

// commandSession is the session a mutation is made for ("" for commands
// of the nameserver's own).
func commandSession(cmd *bfspb.Command) string {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_Mkdir:
		return op.Mkdir.SessionId
	case *bfspb.Command_Create:
		return op.Create.SessionId
	case *bfspb.Command_DeleteFile:
		return op.DeleteFile.SessionId
	case *bfspb.Command_DeleteDir:
		return op.DeleteDir.SessionId
	case *bfspb.Command_Rename:
		return op.Rename.SessionId
	case *bfspb.Command_Chmod:
		return op.Chmod.SessionId
	case *bfspb.Command_AddBlock:
		return op.AddBlock.SessionId
	case *bfspb.Command_SyncBlock:
		return op.SyncBlock.SessionId
	}
	return ""
}
