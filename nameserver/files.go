package nameserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// errNoServers is returned when too few chunkservers are alive to place a
// block.
var errNoServers = blockmap.ErrNotEnoughServers

// AddBlock gives a file open for write its block and the chunkservers to
// write it to, which have created their (empty) replicas of it by the time
// it answers (a packet never creates one). A chunkserver that failed to
// is still named; the writer drops it. If none of them managed to, the
// answer is UNAVAILABLE and a retry creates them again.
func (srv *Server) AddBlock(ctx context.Context, req *bfspb.AddBlockRequest) (*bfspb.AddBlockResponse, error) {
	s, notLeader := leading[*bfspb.AddBlockResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	blk, err := s.addBlock(ctx, req)
	code, msg := statusOf(err)
	return &bfspb.AddBlockResponse{Status: code, Message: msg, Block: blk, Conflict: conflictOf(err)}, nil
}

func (s *term) addBlock(ctx context.Context, req *bfspb.AddBlockRequest) (*bfspb.LocatedBlock, error) {
	p, err := cleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	// Checked here first so that a refused writer hears why before
	// anything is picked (and a retry, answered from the file, is gated
	// too); the command checks again, atomically with its commit.
	if err := s.gate(p, req.SessionId, req.Fences); err != nil {
		return nil, err
	}
	info, err := s.ns.Stat(p)
	if err != nil {
		return nil, err
	}
	if info.WriterSession == "" || info.WriterSession != req.SessionId {
		return nil, namespace.ErrNotOpen
	}
	if len(info.Blocks) > 0 { // a retry: the file keeps its block
		lb, err := s.addBlockAgain(ctx, info.Blocks[0])
		if lb != nil {
			lb.Token = s.issueWrite(info.Blocks[0], holderOf(ctx), req.SessionId, req.Fences)
		}
		return lb, err
	}
	addrs, err := s.blocks.Pick(int(info.Replication), s.placement())
	if err != nil {
		return nil, err
	}
	meta := &bfspb.BlockMeta{Version: 1, WriteSet: addrs}
	res, err := s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_AddBlock{AddBlock: &bfspb.AddBlockCmd{
		Path: p, SessionId: req.SessionId, Block: meta,
	}}})
	if err != nil {
		return nil, err
	}
	// The id comes from the command. Deletes of the block wait for its
	// creates from here on; one sent before (the file deleted at once)
	// reached no replica yet, and the replica a create then makes is
	// one no file points to, which the block reports find (BlockGone).
	meta = res.Info.Blocks[0]
	s.creates.begin(meta.Id)
	defer s.endCreates(meta.Id)
	s.closer.NoteOpen(res.Info.EntryId, res.Info)
	if len(addrs) < int(info.Replication) {
		glog.Warningf("%s: block %d written degraded to %d of %d replicas (%v); repaired once the file is closed",
			p, meta.Id, len(addrs), info.Replication, addrs)
		s.repair.Check(meta.Id)
	}
	if err := s.createReplicas(ctx, meta.Id, addrs); err != nil {
		return nil, err
	}
	lb := locate(res.Info.Blocks[0], true, nil)
	lb.Token = s.issueWrite(meta, holderOf(ctx), req.SessionId, req.Fences)
	return lb, nil
}

// addBlockAgain answers a retried AddBlock with the file's block, its
// replicas created again (a create changes nothing where one exists): the
// first answer may have been lost, or UNAVAILABLE because no chunkserver
// created its replica then.
func (s *term) addBlockAgain(ctx context.Context, b *bfspb.BlockMeta) (*bfspb.LocatedBlock, error) {
	s.creates.begin(b.Id)
	defer s.endCreates(b.Id)
	// Checked after begin: a delete of the file from here on waits for
	// the creates; one before is seen here.
	if _, err := s.ns.BlockOwner(b.Id); err != nil {
		return nil, err
	}
	if err := s.createReplicas(ctx, b.Id, b.WriteSet); err != nil {
		return nil, err
	}
	return locate(b, true, nil), nil
}

// locate describes a block for a client: the live replicas the block map
// knows, or while nothing is reported yet (a block being written), its
// write set.
func locate(b *bfspb.BlockMeta, open bool, replicas []blockmap.Replica) *bfspb.LocatedBlock {
	lb := &bfspb.LocatedBlock{BlockId: b.Id, Size: b.Size, Version: b.Version, Open: open}
	for _, r := range replicas {
		// A closed file is read only from replicas sealed with all of its
		// bytes; one that missed the close is being reconciled.
		if open || (r.Sealed && r.Size >= b.Size) {
			lb.Replicas = append(lb.Replicas, &bfspb.Replica{Address: r.Addr})
		}
	}
	if len(lb.Replicas) == 0 {
		for _, a := range b.WriteSet {
			lb.Replicas = append(lb.Replicas, &bfspb.Replica{Address: a})
		}
	}
	return lb
}

// SyncBlock records how much of a block every replica has on disk.
func (srv *Server) SyncBlock(ctx context.Context, req *bfspb.SyncBlockRequest) (*bfspb.SyncBlockResponse, error) {
	s, notLeader := leading[*bfspb.SyncBlockResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	res, err := s.withPath(req.Path, func(p string) (*namespace.Result, error) {
		return s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_SyncBlock{SyncBlock: &bfspb.SyncBlockCmd{
			Path: p, SessionId: req.SessionId, BlockId: req.BlockId, Size: req.Size, Dropped: req.Dropped,
		}}})
	})
	if err == nil {
		s.closer.DropReplicas(res.Info.EntryId, req.Dropped)
	}
	code, msg := statusOf(err)
	return &bfspb.SyncBlockResponse{Status: code, Message: msg, Conflict: conflictOf(err)}, nil
}

// FinishFile is the writer saying it is done: its last packet sealed the
// replicas, whose BlockReceived reports close the file. The nameserver
// seals every replica that has not reported yet, so a writer that sent no
// packet (nothing sealed the replicas) still has its file closed, at
// length 0, at once and not when its session ends; a replica its last
// packet sealed answers the Seal with the same length. With wait, it
// returns once the file is closed.
//
// Like AddBlock and SyncBlock it is gated by directory locks: in a subtree
// locked by another session the writer gets LOCKED, and during a cleaning
// everyone gets CLEANING, also for a file the cleaning closed already (a
// fenced writer is never told its finish went through). The close itself
// is the nameserver's, driven by the replicas' reports, so a refused
// finish still ends with the file closed.
func (srv *Server) FinishFile(ctx context.Context, req *bfspb.FinishFileRequest) (*bfspb.FinishFileResponse, error) {
	s, notLeader := leading[*bfspb.FinishFileResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	info, err := s.finishFile(ctx, req)
	code, msg := statusOf(err)
	return &bfspb.FinishFileResponse{Status: code, Message: msg, Info: info, Conflict: conflictOf(err)}, nil
}

func (s *term) finishFile(ctx context.Context, req *bfspb.FinishFileRequest) (*bfspb.FileInfo, error) {
	p, err := cleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	if err := s.gate(p, req.SessionId, req.Fences); err != nil {
		return nil, err
	}
	info, err := s.ns.Stat(p)
	if err != nil {
		return nil, err
	}
	if info.WriterSession == "" && req.SessionId != "" {
		return s.finishedAlready(ctx, info, req.Wait)
	}
	if info.WriterSession != req.SessionId {
		return nil, namespace.ErrNotOpen
	}
	if len(info.Blocks) > 0 && len(req.Dropped) > 0 {
		_, err := s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_SyncBlock{SyncBlock: &bfspb.SyncBlockCmd{
			Path: p, SessionId: req.SessionId, BlockId: info.Blocks[0].Id, Dropped: req.Dropped,
		}}})
		if errors.Is(err, namespace.ErrNotOpen) {
			// The replicas' reports closed it since the look above.
			if now, serr := s.ns.Stat(p); serr == nil && now.EntryId == info.EntryId && now.WriterSession == "" {
				return s.finishedAlready(ctx, now, req.Wait)
			}
		}
		if err != nil {
			return nil, err
		}
	} else if err := s.checkSession(req.SessionId); err != nil {
		return nil, err
	}
	s.closer.DropReplicas(info.EntryId, req.Dropped)
	done := s.closer.Finish(info.EntryId)
	if !req.Wait {
		return info, nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("finish %s: %w", p, ctx.Err())
	}
	return s.ns.Stat(p)
}

// finishedAlready answers the finish of a file closed already: a retried
// finish, or the replicas' reports closed it first; with wait, once it
// no longer truncates longer replicas.
func (s *term) finishedAlready(ctx context.Context, info *bfspb.FileInfo, wait bool) (*bfspb.FileInfo, error) {
	if done := s.closer.Closing(info.EntryId); done != nil && wait {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("finish %s: %w", info.Name, ctx.Err())
		}
	}
	return info, nil
}

// GetFileLocation returns a file and where its blocks are.
func (srv *Server) GetFileLocation(ctx context.Context, req *bfspb.GetFileLocationRequest) (*bfspb.GetFileLocationResponse, error) {
	s, notLeader := leading[*bfspb.GetFileLocationResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	info, err := s.ns.Stat(req.Path)
	if err == nil && info.Type == bfspb.FileType_FILE_TYPE_DIR {
		err = namespace.ErrIsDirectory
	}
	code, msg := statusOf(err)
	resp := &bfspb.GetFileLocationResponse{Status: code, Message: msg, Info: info}
	if err != nil {
		return resp, nil
	}
	s.noteLive(info)
	open := info.WriterSession != ""
	holder := holderOf(ctx)
	for _, b := range info.Blocks {
		lb := locate(b, open, s.blocks.Replicas(blockmap.BlockID(b.Id)))
		lb.Token = s.issue(b, bfspb.BlockAccess_BLOCK_ACCESS_READ, holder)
		resp.Blocks = append(resp.Blocks, lb)
	}
	return resp, nil
}

// placement is the policy for a new block: the free-space floor and the
// fill ratio of a volume, and the fewest replicas a degraded write may
// start with.
func (s *Server) placement() blockmap.Policy {
	return blockmap.Policy{MinFree: s.cfg.MinFreeBytes, MaxFill: s.cfg.MaxVolumeFill, MinReplicas: s.cfg.MinReplication}
}

// noteLive sets info's live replica count (see FileInfo.live_replicas)
// for a closed file with a block: the replicas that count, good ones
// (blockmap.ReplicaState.Good) not on a draining chunkserver, fewest
// over its blocks. info is a fresh copy, never the namespace's own.
func (s *term) noteLive(info *bfspb.FileInfo) {
	if info == nil || info.Type == bfspb.FileType_FILE_TYPE_DIR || info.WriterSession != "" || len(info.Blocks) == 0 {
		return
	}
	live := -1
	for _, b := range info.Blocks {
		n := 0
		for _, r := range s.blocks.States(blockmap.BlockID(b.Id)) {
			if r.Counts(b.Size) {
				n++
			}
		}
		if live < 0 || n < live {
			live = n
		}
	}
	n := uint32(live)
	info.LiveReplicas = &n
}
