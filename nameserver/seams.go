package nameserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/nameserver/fileclose"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// The nameserver's side of the interfaces dirlock.Cleaner and
// fileclose.Closer take: the namespace, the block map and the chunkservers
// as each of them needs to see them.

var (
	_ dirlock.FileCloser     = (*fileclose.Closer)(nil)
	_ dirlock.Store          = cleaningStore{}
	_ fileclose.Files        = fileStore{}
	_ fileclose.Chunkservers = chunkservers{}
)

// rpcTimeout bounds one Seal, Truncate or GetBlockInfo call.
const rpcTimeout = 5 * time.Second

// fileStore is the namespace as the closer sees it: its reads, and the
// CloseFile command proposed to the group.
type fileStore struct {
	t *term
	// closed is told the block of every file closed: the repair checks
	// it (a degraded write is repaired once its file is closed).
	closed func(block int64)
}

func (f fileStore) PathOf(id uint64) (string, *bfspb.FileInfo, error) { return f.t.ns.PathOf(id) }
func (f fileStore) BlockOwner(block int64) (uint64, error)            { return f.t.ns.BlockOwner(block) }
func (f fileStore) OpenFiles(session string) ([]namespace.OpenFile, error) {
	return f.t.ns.OpenFiles(session)
}

func (f fileStore) CloseFile(cmd *bfspb.CloseFileCmd) error {
	_, err := f.t.propose(&bfspb.Command{Op: &bfspb.Command_CloseFile{CloseFile: cmd}})
	if err == nil && cmd.BlockId != 0 {
		f.closed(cmd.BlockId)
	}
	return err
}

// chunkservers sends the closer's commands over gRPC; deletes go through
// the server's deleteReplicas, which holds them back while creates of the
// block are in flight.
type chunkservers struct{ s *term }

func (c chunkservers) Seal(ctx context.Context, addr string, block int64) error {
	if hook := c.s.cfg.TestingKnobs.BeforeSeal; hook != nil {
		hook(ctx, addr, block)
	}
	cl, err := c.s.chunkserver(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := cl.Seal(ctx, &bfspb.SealRequest{BlockId: block, Term: c.s.num})
	if err == nil && resp.Status != bfspb.StatusCode_OK {
		err = fmt.Errorf("%v: %s", resp.Status, resp.Message)
	}
	return err
}

// Truncate cuts a replica to its closed file's length. It is not held in
// safe mode: a cleaning must see its replicas cut before the directory is
// UNLOCKED (I5), and the cut compares one replica with the namespace's own
// record of the file, not a guess from missing reports.
func (c chunkservers) Truncate(ctx context.Context, addr string, block, size int64) error {
	if hook := c.s.cfg.TestingKnobs.BeforeTruncate; hook != nil {
		hook(ctx, addr, block, size)
	}
	cl, err := c.s.chunkserver(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := cl.Truncate(ctx, &bfspb.TruncateRequest{BlockId: block, Size: size, ClusterId: c.s.ns.ClusterID(), Term: c.s.num})
	if err == nil && resp.Status != bfspb.StatusCode_OK {
		err = fmt.Errorf("%v: %s", resp.Status, resp.Message)
	}
	return err
}

func (c chunkservers) Replica(ctx context.Context, addr string, block int64) (fileclose.ReplicaInfo, error) {
	cl, err := c.s.chunkserver(addr)
	if err != nil {
		return fileclose.ReplicaInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := cl.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: block})
	switch {
	case err != nil:
		return fileclose.ReplicaInfo{}, err
	case resp.Status == bfspb.StatusCode_NOT_FOUND:
		return fileclose.ReplicaInfo{}, nil
	case resp.Status != bfspb.StatusCode_OK:
		return fileclose.ReplicaInfo{}, fmt.Errorf("%v: %s", resp.Status, resp.Message)
	}
	return fileclose.ReplicaInfo{Found: true, Sealed: resp.Sealed, Size: resp.Size}, nil
}

func (c chunkservers) Delete(addr string, blocks []int64) { c.s.deleteReplicas(addr, blocks) }

// cleaningStore persists the ends of cleanings through the namespace's
// apply path, and reads the cleanings it records.
type cleaningStore struct{ s *term }

func (st cleaningStore) FinishCleaning(ctx context.Context, j dirlock.Job, truncated int64) (bool, error) {
	if hook := st.s.cfg.TestingKnobs.BeforeFinishCleaning; hook != nil {
		hook(ctx, j.Path)
	}
	res, err := st.s.propose(&bfspb.Command{
		Op: &bfspb.Command_FinishCleaning{FinishCleaning: &bfspb.FinishCleaningCmd{
			Path: j.Path, EntryId: j.Dir, Epoch: uint64(j.Epoch), BytesTruncated: truncated,
		}},
	})
	if errors.Is(err, namespace.ErrNotFound) {
		return false, fmt.Errorf("%w: %w", dirlock.ErrGone, err)
	}
	if err != nil {
		return false, err
	}
	return len(res.RemovedLocks) > 0, nil
}

func (st cleaningStore) Cleanings(context.Context) ([]dirlock.Job, error) {
	cls, err := st.s.ns.Cleanings()
	if err != nil {
		return nil, err
	}
	out := make([]dirlock.Job, len(cls))
	for i, c := range cls {
		out[i] = cleaningOf(c.Path, c.Dir.EntryId, c.Record)
	}
	return out, nil
}

// cleaningOf is the cleaning the namespace recorded for directory dir at
// path.
func cleaningOf(path string, dir uint64, rec *bfspb.CleaningRecord) dirlock.Job {
	return dirlock.Job{
		Path: path, Dir: dir, Epoch: dirlock.Epoch(rec.Epoch), Reason: rec.Reason, Files: rec.Files,
	}
}
