package nameserver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/statuscode"
	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Register records a chunkserver and tells it how often to heartbeat and
// report.
func (srv *Server) Register(ctx context.Context, req *bfspb.RegisterRequest) (*bfspb.RegisterResponse, error) {
	s, notLeader := leading[*bfspb.RegisterResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	if req.Address == "" {
		return &bfspb.RegisterResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT, Message: "register: empty address"}, nil
	}
	holder, err := s.checkRegister(ctx, req.Address)
	if err != nil {
		glog.Warningf("register of %s by %s refused: %v", req.Address, who(ctx), err)
		code, msg := statusOf(err)
		return &bfspb.RegisterResponse{Status: code, Message: msg}, nil
	}
	if cid := s.ns.ClusterID(); req.ClusterId != "" && req.ClusterId != cid {
		msg := fmt.Sprintf("chunkserver %s belongs to cluster %s, this nameserver to cluster %s: "+
			"check the nameserver's --data directory and the chunkserver's --nameserver address", req.Address, req.ClusterId, cid)
		glog.Errorf("register refused: %s", msg)
		return &bfspb.RegisterResponse{Status: bfspb.StatusCode_WRONG_CLUSTER, Message: msg, ClusterId: cid}, nil
	}
	vols, err := volumesOf(req.Volumes)
	if err != nil {
		return &bfspb.RegisterResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT, Message: "register " + req.Address + ": " + err.Error()}, nil
	}
	u := blockmap.Usage{Host: req.HostId, Capacity: req.CapacityBytes, Used: req.UsedBytes, Free: req.FreeBytes, Volumes: vols}
	now := s.cfg.Clock.Now()
	id := s.blocks.Register(req.Address, u, now)
	s.regs.record(req.Address, holder)
	s.dead.registered(req.Address, u.Host, now)
	glog.Infof("chunkserver %s registered as %d with %d volumes (%s)", req.Address, id, max(len(vols), 1), volumeSummary(vols))
	s.peers.Reset(req.Address) // it is listening: seals and truncates need not wait to reconnect
	s.closer.Registered()
	return &bfspb.RegisterResponse{
		ChunkserverId:       int64(id),
		HeartbeatIntervalMs: s.cfg.HeartbeatInterval.Milliseconds(),
		ReportIntervalMs:    s.cfg.ReportInterval.Milliseconds(),
		ClusterId:           s.ns.ClusterID(),
		Term:                s.num,
		MinFreeBytes:        s.cfg.MinFreeBytes,
		MaxVolumeFill:       s.cfg.MaxVolumeFill,
		BlockKeys:           s.keysAnswer(),
	}, nil
}

// HeartBeat keeps a chunkserver alive and records its volumes: one
// reported failed loses its replicas at once, and the repair looks for
// what they leave short.
func (srv *Server) HeartBeat(ctx context.Context, req *bfspb.HeartBeatRequest) (*bfspb.HeartBeatResponse, error) {
	s, notLeader := leading[*bfspb.HeartBeatResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	if err := s.fromChunkserver(ctx, "heartbeat", req.Address); err != nil {
		code, msg := statusOf(err)
		return &bfspb.HeartBeatResponse{Status: code, Message: msg}, nil
	}
	vols, err := volumesOf(req.Volumes)
	if err != nil {
		return &bfspb.HeartBeatResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT, Message: "heartbeat of " + req.Address + ": " + err.Error()}, nil
	}
	u := blockmap.Usage{Capacity: req.CapacityBytes, Used: req.UsedBytes, Free: req.FreeBytes, Volumes: vols}
	before, _ := s.blocks.Registered(req.Address)
	if !s.blocks.Heartbeat(blockmap.ServerID(req.ChunkserverId), req.Address, u, s.cfg.Clock.Now()) {
		return &bfspb.HeartBeatResponse{Status: bfspb.StatusCode_UNAVAILABLE, Reregister: true,
			Message: "unknown chunkserver: register again"}, nil
	}
	if failed := newlyFailed(before.Volumes, vols); len(failed) > 0 {
		for _, v := range failed {
			glog.Errorf("chunkserver %s: volume %s failed (%s): its %d replicas no longer count and are to be copied elsewhere",
				req.Address, v.Dir, v.Reason, blocksOn(before.Volumes, v.Index))
		}
		s.repair.Rescan()
	}
	return &bfspb.HeartBeatResponse{Term: s.num, BlockKeys: s.keysAnswer()}, nil
}

// BlockReport takes one page of a chunkserver's full block report (see
// blockmap.Map.ReportPage: the last page replaces what it holds) and
// answers which of the page's blocks the namespace positively knows to
// belong to no file (see obsolete); in safe mode it answers none.
func (srv *Server) BlockReport(ctx context.Context, req *bfspb.BlockReportRequest) (*bfspb.BlockReportResponse, error) {
	s, notLeader := leading[*bfspb.BlockReportResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	if err := s.fromChunkserver(ctx, "block report", req.Address); err != nil {
		code, msg := statusOf(err)
		return &bfspb.BlockReportResponse{Status: code, Message: msg}, nil
	}
	replicas := make(map[blockmap.BlockID]blockmap.Replica, len(req.Blocks))
	resp := &bfspb.BlockReportResponse{ClusterId: s.ns.ClusterID()}
	ids := make([]int64, len(req.Blocks))
	for i, b := range req.Blocks {
		ids[i] = b.BlockId
	}
	s.safe.Reported(ids)
	var unknown []int64
	for _, b := range req.Blocks {
		fate, err := s.ns.Fate(b.BlockId)
		switch {
		case err != nil:
			glog.Warningf("block %d on %s: %v; keeping the replica", b.BlockId, req.Address, err)
		case fate == namespace.BlockLive:
			replicas[blockmap.BlockID(b.BlockId)] = replicaOf(b)
			s.unalloc.forget(req.Address, b.BlockId)
		case fate == namespace.BlockUnknown && !s.unallocatedDue(req.Address, b.BlockId):
			unknown = append(unknown, b.BlockId)
		case fate == namespace.BlockUnknown:
			// Never allocated, past the grace period: deleted like a
			// block that is gone (never in safe mode, see unallocatedDue).
			glog.Warningf("chunkserver %s: deleting block %d, never allocated by this namespace, kept %v", req.Address, b.BlockId, s.cfg.UnallocatedGrace)
			resp.Obsolete = append(resp.Obsolete, b.BlockId)
			s.unalloc.forget(req.Address, b.BlockId)
		case s.safe.On():
			// Held: the report after safe mode names it again.
		case !s.creates.hold(req.Address, b.BlockId):
			// While its creates are in flight the delete waits for them.
			resp.Obsolete = append(resp.Obsolete, b.BlockId)
		}
	}
	if len(resp.Obsolete) > 0 {
		// An obsolete answer deletes replicas: only a leader a majority
		// still follows gives one.
		if err := s.verify(); err != nil {
			code, msg := statusOf(err)
			return &bfspb.BlockReportResponse{Status: code, Message: msg}, nil
		}
	}
	if len(unknown) > 0 {
		glog.V(1).Infof("chunkserver %s holds %d blocks this namespace never allocated (first %d): kept until the grace period (%v) has passed; was the nameserver restored from an older data directory?",
			req.Address, len(unknown), unknown[0], s.cfg.UnallocatedGrace)
	}
	addr := req.Address
	page := blockmap.Page{Report: req.ReportId, Seq: req.Page, More: req.More}
	first, err := s.blocks.ReportPage(blockmap.ServerID(req.ChunkserverId), addr, page, replicas, s.cfg.Clock.Now())
	if err != nil {
		code, msg := reportCodes.Of(err)
		return &bfspb.BlockReportResponse{Status: code, Message: msg}, nil
	}
	if first && !req.More {
		// A chunkserver back from the dead may leave blocks with too
		// many replicas. One pass over all blocks costs less than a
		// lookup of each block a big chunkserver holds. What a later
		// report changes, the repair's periodic pass finds.
		s.repair.Rescan()
		s.safe.Recheck()
	}
	s.noteSealed(addr, req.Blocks)
	// A replica may have missed the close of its file while its
	// chunkserver was away (unsealed), or the nameserver may have died
	// between a close and the truncation of a longer replica. Later sealed
	// replicas are reconciled by their BlockReceived, so only the first
	// report of a registration needs to look at every replica.
	var check []*bfspb.ReportedBlock
	for _, b := range req.Blocks {
		if _, known := replicas[blockmap.BlockID(b.BlockId)]; known && (first || !b.Sealed) {
			check = append(check, b)
		}
	}
	s.closer.Reconcile(addr, check)
	return resp, nil
}

// reportCodes maps the errors of a block report page to the protocol.
var reportCodes = statuscode.Table{
	{Err: blockmap.ErrUnknownServer, Code: bfspb.StatusCode_UNAVAILABLE},
	{Err: blockmap.ErrReportOrder, Code: bfspb.StatusCode_INVALID_ARGUMENT},
}

// BlockReceived records replicas a chunkserver has sealed.
func (srv *Server) BlockReceived(ctx context.Context, req *bfspb.BlockReceivedRequest) (*bfspb.BlockReceivedResponse, error) {
	s, notLeader := leading[*bfspb.BlockReceivedResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	if err := s.fromChunkserver(ctx, "block received", req.Address); err != nil {
		code, msg := statusOf(err)
		return &bfspb.BlockReceivedResponse{Status: code, Message: msg}, nil
	}
	replicas := make(map[blockmap.BlockID]blockmap.Replica, len(req.Blocks))
	for _, b := range req.Blocks {
		replicas[blockmap.BlockID(b.BlockId)] = replicaOf(b)
	}
	addr := req.Address
	if !s.blocks.Received(blockmap.ServerID(req.ChunkserverId), addr, replicas) {
		return &bfspb.BlockReceivedResponse{Status: bfspb.StatusCode_UNAVAILABLE, Message: "unknown chunkserver: register again"}, nil
	}
	s.noteSealed(addr, req.Blocks)
	s.closer.Reconcile(addr, req.Blocks)
	ids := make([]int64, len(req.Blocks))
	for i, b := range req.Blocks {
		ids[i] = b.BlockId
	}
	s.repair.Received(ids...)
	return &bfspb.BlockReceivedResponse{}, nil
}

// ReportBadReplicas marks replicas that failed a checksum corrupt: they
// stop counting and readers are no longer sent to them (while a good one
// remains). A chunkserver's report of its own replica is its verdict;
// any other report (a reader's, another chunkserver's) is a hint, and the
// replica's chunkserver is asked to verify it first (VerifyBlock): only a
// confirmed replica is marked. The repair copies marked replicas' blocks
// from a good replica and then deletes them; until the block has its full
// count elsewhere they are kept (a corrupt replica may still hold the
// only copy of some chunks). Replicas of blocks that belong to no live
// file are ignored.
func (srv *Server) ReportBadReplicas(ctx context.Context, req *bfspb.ReportBadReplicasRequest) (*bfspb.ReportBadReplicasResponse, error) {
	s, notLeader := leading[*bfspb.ReportBadReplicasResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	for _, r := range req.Replicas {
		if r.Address == "" || r.BlockId <= 0 {
			return &bfspb.ReportBadReplicasResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT,
				Message: fmt.Sprintf("report bad replicas: block %d at %q", r.BlockId, r.Address)}, nil
		}
	}
	reporter := who(ctx)
	for _, r := range req.Replicas {
		fate, err := s.ns.Fate(r.BlockId)
		if err != nil || fate != namespace.BlockLive {
			glog.V(1).Infof("replica of block %d on %s reported corrupt by %s: not a live block (%v), ignored", r.BlockId, r.Address, reporter, err)
			continue
		}
		if !s.ownReport(ctx, req, r.Address) && !s.confirmed(ctx, r, reporter) {
			continue
		}
		if s.blocks.MarkCorrupt(blockmap.BlockID(r.BlockId), r.Address) {
			glog.Errorf("replica of block %d on %s is corrupt (reported by %s: %s): it no longer counts; kept until it is replaced",
				r.BlockId, r.Address, reporter, r.Reason)
			s.repair.Check(r.BlockId)
		}
	}
	return &bfspb.ReportBadReplicasResponse{}, nil
}

// confirmed has the chunkserver holding the replica r names verify it,
// and reports whether it found it corrupt. A replica the block map does
// not place there is not asked about.
func (s *term) confirmed(ctx context.Context, r *bfspb.BadReplica, reporter string) bool {
	held := false
	for _, st := range s.blocks.States(blockmap.BlockID(r.BlockId)) {
		held = held || st.Addr == r.Address
	}
	if !held {
		glog.V(1).Infof("replica of block %d on %s reported corrupt by %s: no such replica, ignored", r.BlockId, r.Address, reporter)
		return false
	}
	corrupt, err := s.verifyReplica(ctx, r.Address, r.BlockId)
	switch {
	case err != nil:
		glog.Warningf("replica of block %d on %s reported corrupt by %s (%s): not verified, kept: %v", r.BlockId, r.Address, reporter, r.Reason, err)
	case !corrupt:
		glog.Warningf("replica of block %d on %s reported corrupt by %s (%s): its chunkserver verified it sound, kept", r.BlockId, r.Address, reporter, r.Reason)
	}
	return corrupt
}

func (s *term) noteSealed(addr string, blocks []*bfspb.ReportedBlock) {
	for _, b := range blocks {
		if b.Sealed {
			s.closer.Received(addr, b.BlockId, b.Size)
		}
	}
}

func replicaOf(b *bfspb.ReportedBlock) blockmap.Replica {
	return blockmap.Replica{Size: b.Size, Version: b.Version, Sealed: b.Sealed, Volume: int(b.Volume)}
}

// watchChunkservers declares silent chunkservers dead, every heartbeat
// interval, until the server stops.
func (s *term) watchChunkservers() {
	defer close(s.livenessDone)
	for {
		t := s.cfg.Clock.NewTimer(s.cfg.HeartbeatInterval)
		select {
		case <-s.stopc:
			t.Stop()
			return
		case <-t.C():
		}
		dead := s.dead.expire(func() []blockmap.Server { return s.blocks.Expire(s.cfg.Clock.Now(), s.cfg.DeadTimeout) })
		for _, d := range dead {
			glog.Warningf("chunkserver %s (%d) is dead: silent for over %v; its %d replicas are to be copied", d.Addr, d.ID, s.cfg.DeadTimeout, d.Blocks)
		}
		for _, d := range s.dead.expireMissing(s.cfg.Clock.Now(), s.started, s.cfg.DeadTimeout) {
			glog.Warningf("chunkserver %s, registered before the nameserver started, has not come back within %v: dead", d.Addr, s.cfg.DeadTimeout)
		}
		if len(dead) > 0 {
			s.repair.Rescan()
		}
		s.closer.Recheck()
		if err := s.rotateKeys(); err != nil {
			glog.Warningf("term %d: block keys: %v", s.num, err)
		}
	}
}

// dropBlocks tells the chunkservers holding blocks of removed files to
// delete them. Best effort: block reports catch whatever this misses.
func (s *term) dropBlocks(blocks []*bfspb.BlockMeta) {
	byAddr := map[string][]int64{}
	for _, b := range blocks {
		addrs := append([]string(nil), b.WriteSet...)
		for _, r := range s.blocks.Replicas(blockmap.BlockID(b.Id)) {
			addrs = append(addrs, r.Addr)
		}
		addrs = append(addrs, s.blocks.Corrupt(blockmap.BlockID(b.Id))...)
		slices.Sort(addrs)
		addrs = slices.Compact(addrs)
		for _, a := range addrs {
			if ids := byAddr[a]; len(ids) == 0 || ids[len(ids)-1] != b.Id {
				byAddr[a] = append(ids, b.Id)
			}
		}
		s.blocks.Forget(blockmap.BlockID(b.Id))
		s.repair.Forget(b.Id)
	}
	for addr, ids := range byAddr {
		s.deleteReplicas(addr, ids)
	}
}

// deleteReplicas tells the chunkserver at addr to delete replicas. Best
// effort: block reports catch whatever this misses. In safe mode the
// delete is held until it ends; the delete of a block whose creates are
// in flight waits until they have ended (see createReplicas).
func (s *term) deleteReplicas(addr string, ids []int64) {
	ids = slices.Clone(ids)
	if s.safe.later(func() { s.deleteReplicas(addr, ids) }) {
		glog.V(1).Infof("safe mode: holding the delete of %d replicas on %s until it ends", len(ids), addr)
		return
	}
	ids = slices.DeleteFunc(ids, func(id int64) bool { return s.creates.hold(addr, id) })
	if len(ids) == 0 {
		return
	}
	s.tasks.Go(func(ctx context.Context) {
		cl, err := s.chunkserver(addr)
		if err != nil {
			return
		}
		for page := range slices.Chunk(ids, s.deletePage()) {
			if !s.deletePageOn(ctx, cl, addr, page) {
				return
			}
		}
	})
}

// DefaultDeletePage is how many blocks one DeleteBlocks message names: at
// most 10 bytes each on the wire, so 640 KiB, well within the default 4
// MiB gRPC message limit.
const DefaultDeletePage = 1 << 16

func (s *Server) deletePage() int {
	if n := s.cfg.TestingKnobs.DeletePage; n > 0 {
		return n
	}
	return DefaultDeletePage
}

// deletePageOn sends one page of deletes to the chunkserver at addr; it
// reports whether the chunkserver answered, so a down chunkserver is not
// sent the other pages.
func (s *term) deletePageOn(ctx context.Context, cl bfspb.ChunkServerClient, addr string, ids []int64) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cl.DeleteBlocks(ctx, &bfspb.DeleteBlocksRequest{BlockIds: ids, ClusterId: s.ns.ClusterID(), Term: s.num})
	switch {
	case err != nil:
		glog.V(1).Infof("delete %d blocks on %s: %v", len(ids), addr, err)
		return false
	case resp.Status != bfspb.StatusCode_OK:
		glog.V(1).Infof("delete %d blocks on %s: %v %s", len(ids), addr, resp.Status, resp.Message)
	}
	return true
}

// LiveChunkservers returns how many chunkservers are registered with this
// nameserver and alive (0 unless it leads).
func (s *Server) LiveChunkservers() int {
	if t := s.current(); t != nil {
		return len(t.blocks.Servers())
	}
	return 0
}

// chunkserver returns a client of the chunkserver at addr.
func (s *Server) chunkserver(addr string) (bfspb.ChunkServerClient, error) {
	if dial := s.cfg.TestingKnobs.DialChunkserver; dial != nil {
		return dial(addr)
	}
	conn, err := s.peers.Conn(addr)
	if err != nil {
		return nil, err
	}
	return bfspb.NewChunkServerClient(conn), nil
}
