package repair

import (
	"context"
	"errors"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/nameserver/blockmap"
)

const (
	// minCopyTimeout and minCopyRate bound a copy's time: it may take
	// minCopyTimeout plus its size at minCopyRate (a 64 MiB block, 26 s).
	minCopyTimeout = 10 * time.Second
	minCopyRate    = 4 << 20 // bytes per second
	// expectFor is how long a copy that succeeded counts before its
	// target's BlockReceived shows it in the block map.
	expectFor = 30 * time.Second
	// examine bounds the queued blocks one dispatch looks at, so blocks
	// that cannot be copied now (no source or target free) cost little.
	examine = 1024
)

// copyTimeout is how long a copy of size bytes may take.
func copyTimeout(size int64) time.Duration {
	return minCopyTimeout + time.Duration(float64(size)/minCopyRate*float64(time.Second))
}

// dispatch starts the copies the queue calls for, most urgent first,
// within the bounds on copies in flight.
func (s *Scheduler) dispatch() {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, until := range s.mu.busy {
		if now.After(until) {
			delete(s.mu.busy, addr)
		}
	}
	var looked []*entry
	for len(looked) < examine && s.mu.inFlight < s.cfg.MaxCopies && s.mu.queue.Len() > 0 {
		e := s.mu.queue.pop()
		looked = append(looked, e)
		for !now.Before(e.notBefore) && e.need() > 0 && s.mu.inFlight < s.cfg.MaxCopies {
			if !s.startLocked(e, now) {
				break
			}
		}
	}
	for _, e := range looked {
		if e.need() > 0 {
			s.mu.queue.put(e)
		}
	}
}

// startLocked starts one copy of e's block, if a source and a target with
// room exist.
func (s *Scheduler) startLocked(e *entry, now time.Time) bool {
	for addr, until := range e.avoid {
		if now.After(until) {
			delete(e.avoid, addr)
		}
	}
	src := s.sourceLocked(e)
	if src == "" {
		return false
	}
	exclude := make([]string, 0, len(s.mu.perServer)+len(s.mu.busy)+len(e.avoid)+len(e.copies)+len(e.expect))
	for addr, n := range s.mu.perServer {
		if n >= s.cfg.MaxCopiesPerServer {
			exclude = append(exclude, addr)
		}
	}
	for _, m := range []map[string]time.Time{s.mu.busy, e.avoid, e.expect} {
		for addr := range m {
			exclude = append(exclude, addr)
		}
	}
	for addr := range e.copies {
		exclude = append(exclude, addr)
	}
	b := e.block
	tgt, err := s.cfg.Replicas.Target(blockmap.BlockID(b.ID), exclude)
	if err != nil {
		glog.V(2).Infof("repair: block %d: no target: %v", b.ID, err)
		return false
	}
	if !s.copies.Go(func(ctx context.Context) { s.copy(ctx, e, b, tgt, src) }) {
		return false // closing
	}
	e.copies[tgt] = src
	s.mu.perServer[src]++
	s.mu.perServer[tgt]++
	s.mu.inFlight++
	return true
}

// sourceLocked picks the replica of e's block to copy from: the best
// ranked (see sourceRank), then the least busy, with room for one more
// copy; "" if none.
func (s *Scheduler) sourceLocked(e *entry) string {
	best, bestRank, bestLoad := "", 0, 0
	for _, r := range e.states {
		rank := sourceRank(e.block, r)
		if rank < 0 {
			continue
		}
		if _, bad := e.avoid[r.Addr]; bad {
			continue
		}
		load := s.mu.perServer[r.Addr]
		if load >= s.cfg.MaxCopiesPerServer {
			continue
		}
		if best == "" || rank < bestRank || (rank == bestRank && load < bestLoad) {
			best, bestRank, bestLoad = r.Addr, rank, load
		}
	}
	return best
}

// copy runs one copy and records how it went.
func (s *Scheduler) copy(ctx context.Context, e *entry, b Block, tgt, src string) {
	cctx, cancel := context.WithTimeout(ctx, copyTimeout(b.Size))
	start := s.cfg.Clock.Now()
	err := s.cfg.Chunkservers.Replicate(cctx, tgt, src, b.ID, b.Size, b.Version)
	cancel()
	if ctx.Err() != nil {
		return // closing: the counts die with the Scheduler
	}
	result := resultOf(err)
	if err == nil {
		glog.V(1).Infof("repair: block %d (%d bytes) copied from %s to %s in %v", b.ID, b.Size, src, tgt, s.cfg.Clock.Now().Sub(start))
	} else {
		glog.Warningf("repair: copy of block %d from %s to %s: %v", b.ID, src, tgt, err)
	}
	s.mu.Lock()
	s.finishLocked(e, b, tgt, src, err)
	s.mu.Unlock()
	var bytes int64
	if err == nil {
		bytes = b.Size
	}
	s.cfg.OnCopy(result, bytes)
	s.poke()
}

// finishLocked takes a copy out of flight and learns from its failure.
func (s *Scheduler) finishLocked(e *entry, b Block, tgt, src string, err error) {
	delete(e.copies, tgt)
	for _, addr := range []string{src, tgt} {
		if s.mu.perServer[addr]--; s.mu.perServer[addr] <= 0 {
			delete(s.mu.perServer, addr)
		}
	}
	s.mu.inFlight--
	now := s.cfg.Clock.Now()
	switch {
	case err == nil:
		e.expect[tgt] = now.Add(expectFor)
		e.backoff = nil
	case errors.Is(err, ErrBusy):
		s.mu.busy[tgt] = now.Add(s.cfg.BusyFor)
	case errors.Is(err, ErrExists), errors.Is(err, ErrWrongCluster):
		e.avoid[tgt] = now.Add(s.cfg.BusyFor)
	case errors.Is(err, ErrSourceCorrupt), errors.Is(err, ErrSourceNotFound), errors.Is(err, ErrSourceUnavailable):
		e.avoid[src] = now.Add(s.cfg.BusyFor)
	default:
		if e.backoff == nil {
			e.backoff = retry.New(100*time.Millisecond, 10*time.Second)
		}
		e.notBefore = now.Add(e.backoff.NextBackOff())
	}
	if cur := s.mu.entries[b.ID]; cur == e {
		s.mu.dirty[b.ID] = struct{}{}
	}
}

// resultOf names the result of a copy for OnCopy.
func resultOf(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{ErrExists, "exists"}, {ErrSourceCorrupt, "source_corrupt"}, {ErrSourceNotFound, "source_not_found"},
		{ErrSourceUnavailable, "source_unavailable"}, {ErrBusy, "busy"}, {ErrWrongCluster, "wrong_cluster"},
		{context.DeadlineExceeded, "timeout"},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	if err == nil {
		return "ok"
	}
	return "error"
}
