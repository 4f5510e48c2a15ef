package nameserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// tokenChunkservers names the ListChunkservers page tokens (listing.go).
const tokenChunkservers = 'c'

// Decommission starts or ends the draining of chunkservers. Every address
// must be known (live, dead since the nameserver started, or draining);
// otherwise nothing changes. Asking again is harmless. The drain is
// recorded in the namespace (DrainCmd) before it takes effect, so it
// survives a restart.
func (srv *Server) Decommission(ctx context.Context, req *bfspb.DecommissionRequest) (*bfspb.DecommissionResponse, error) {
	s, notLeader := leading[*bfspb.DecommissionResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	verb := "decommission"
	if req.Cancel {
		verb = "cancel decommission"
	}
	if code, msg := s.checkDecommission(verb, req.Addresses); code != bfspb.StatusCode_OK {
		return &bfspb.DecommissionResponse{Status: code, Message: msg}, nil
	}
	// Recorded first, so that the drain outlives a restart.
	if _, err := s.propose(&bfspb.Command{
		Op: &bfspb.Command_Drain{Drain: &bfspb.DrainCmd{Addresses: req.Addresses, Cancel: req.Cancel}}}); err != nil {
		code, msg := statusOf(err)
		return &bfspb.DecommissionResponse{Status: code, Message: verb + ": " + msg}, nil
	}
	resp := &bfspb.DecommissionResponse{}
	now := s.cfg.Clock.Now()
	changed := false
	for _, addr := range req.Addresses {
		if s.blocks.SetDraining(addr, !req.Cancel) {
			glog.Infof("%s of chunkserver %s", verb, addr)
			changed = true
		}
	}
	if changed {
		// Replicas stopped (or started) counting: the repair copies the
		// blocks now short of replicas, or trims those now over.
		s.repair.Rescan()
	}
	for _, addr := range req.Addresses {
		if r, ok := s.serverRow(addr); ok {
			resp.Chunkservers = append(resp.Chunkservers, s.chunkserverInfo(r, now))
		} else {
			// Draining, yet neither live nor remembered dead.
			resp.Chunkservers = append(resp.Chunkservers, &bfspb.ChunkserverInfo{Address: addr,
				Draining: !req.Cancel, State: bfspb.ChunkserverState_CHUNKSERVER_STATE_DEAD})
		}
	}
	return resp, nil
}

// loadDraining marks draining the chunkservers the namespace records as
// being decommissioned, before any registers.
func (s *term) loadDraining() error {
	addrs, err := s.ns.Draining()
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		s.blocks.SetDraining(addr, true)
	}
	if len(addrs) > 0 {
		glog.Infof("chunkservers being decommissioned: %s", strings.Join(addrs, ", "))
	}
	return nil
}

// loadChunkservers reads back what the namespace remembers of the
// chunkservers (ChunkserverCmd): the dead are listed at once, those
// registered before this term once they miss the dead timeout.
func (s *term) loadChunkservers() error {
	records, err := s.ns.Chunkservers()
	if err != nil {
		return err
	}
	s.dead.load(records)
	return nil
}

// recordChunkserver writes what the nameserver remembers of a
// chunkserver into the namespace; a failure is logged (the list in
// memory stands).
func (s *term) recordChunkserver(c *bfspb.ChunkserverCmd) {
	if _, err := s.propose(&bfspb.Command{Op: &bfspb.Command_Chunkserver{Chunkserver: c}}); err != nil {
		glog.Warningf("recording chunkserver %s in the namespace: %v", c.Address, err)
	}
}

// checkDecommission refuses a request with no address, an empty one, or
// one the nameserver does not know.
func (s *term) checkDecommission(verb string, addrs []string) (bfspb.StatusCode, string) {
	if len(addrs) == 0 {
		return bfspb.StatusCode_INVALID_ARGUMENT, verb + ": no chunkserver address given"
	}
	var unknown []string
	for _, a := range addrs {
		if a == "" {
			return bfspb.StatusCode_INVALID_ARGUMENT, verb + ": empty chunkserver address"
		}
		if _, ok := s.serverRow(a); !ok && !s.blocks.Draining(a) {
			unknown = append(unknown, fmt.Sprintf("%q", a))
		}
	}
	if len(unknown) > 0 {
		return bfspb.StatusCode_NOT_FOUND, fmt.Sprintf("%s: unknown chunkserver %s (bfs admin report lists the known ones); nothing changed",
			verb, strings.Join(unknown, ", "))
	}
	return bfspb.StatusCode_OK, ""
}

// ListChunkservers reports one page of the chunkservers known, by
// address.
func (srv *Server) ListChunkservers(ctx context.Context, req *bfspb.ListChunkserversRequest) (*bfspb.ListChunkserversResponse, error) {
	s, notLeader := leading[*bfspb.ListChunkserversResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	after, err := parsePageToken(tokenChunkservers, req.PageToken)
	if err != nil {
		code, msg := statusOf(err)
		return &bfspb.ListChunkserversResponse{Status: code, Message: msg}, nil
	}
	rows := s.serverRows()
	i := 0
	for i < len(rows) && after != "" && rows[i].Addr <= after {
		i++
	}
	rows = rows[i:]
	limit := pageSize(req.PageSize)
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	st := s.repair.Stats()
	resp := &bfspb.ListChunkserversResponse{Health: &bfspb.BlockHealth{
		UnderReplicatedBlocks: int64(st.UnderReplicated), MissingBlocks: int64(st.Missing),
		CorruptReplicas: int64(s.blocks.CorruptCount()), RepairQueue: int64(st.Queued), RepairCopiesInFlight: int64(st.InFlight),
	}}
	now := s.cfg.Clock.Now()
	var budget pageBudget
	for _, r := range rows {
		info := s.chunkserverInfo(r, now)
		if !budget.fits(info) {
			more = true
			break
		}
		resp.Chunkservers = append(resp.Chunkservers, info)
	}
	if more && len(resp.Chunkservers) > 0 {
		resp.NextPageToken = pageToken(tokenChunkservers, resp.Chunkservers[len(resp.Chunkservers)-1].Address)
	}
	return resp, nil
}
