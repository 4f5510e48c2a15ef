package blockmap

import (
	"errors"
	"fmt"
	"net"
	"sort"
)

// Usage is what a chunkserver says of its disk, and the host it runs on.
type Usage struct {
	// Host names the machine; "" means the host part of the address.
	Host string
	// Capacity, Used and Free are in bytes. A Capacity of 0 means the
	// chunkserver cannot tell (its free space is unknown, not nil).
	Capacity, Used, Free int64
}

// ErrNotEnoughServers is returned by Pick when fewer live chunkservers
// with room to spare exist than the policy's minimum.
var ErrNotEnoughServers = errors.New("not enough live chunkservers")

// Policy says which chunkservers a new block may go to.
type Policy struct {
	// MinFree is the free-space floor in bytes: a chunkserver that last
	// reported less free space is never picked.
	MinFree int64
	// MinReplicas is the fewest replicas a new block may start with when
	// fewer chunkservers are eligible than wanted; below 1 counts as 1.
	MinReplicas int
}

// hostOf is the host a chunkserver's replicas count against.
func (s *Server) hostOf() string {
	if s.Host != "" {
		return s.Host
	}
	if h, _, err := net.SplitHostPort(s.Addr); err == nil {
		return h
	}
	return s.Addr
}

// eligible says whether s takes a new block under p: it is not draining
// and has room. A chunkserver that cannot tell its free space is given
// the benefit of the doubt.
func (s *Server) eligible(p Policy) bool {
	return !s.Draining && (s.Capacity == 0 || s.Free >= p.MinFree)
}

// score orders chunkservers for a new block: the free space left per block
// in flight, so that a burst of AddBlocks spreads before the reports catch
// up, and fuller disks get fewer new blocks.
func (s *Server) score() float64 {
	return float64(s.Free) / float64(1+s.Assigned)
}

// Pick chooses up to want live chunkservers for a new block and counts the
// block against them. Only chunkservers at or above p.MinFree are chosen;
// among them the ones with the most free space per block in flight come
// first, and no two replicas share a host while unused hosts remain. Fewer
// than want (a degraded write) are returned when fewer are eligible, as
// long as there are at least p.MinReplicas (capped at want); otherwise the
// error is ErrNotEnoughServers.
func (m *Map) Pick(want int, p Policy) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cands []*Server
	for _, s := range m.mu.servers {
		if s.eligible(p) {
			cands = append(cands, s)
		}
	}
	need := min(max(p.MinReplicas, 1), want)
	if len(cands) < need {
		return nil, fmt.Errorf("%w: want %d (at least %d), have %d of %d live with %d bytes free",
			ErrNotEnoughServers, want, need, len(cands), len(m.mu.servers), p.MinFree)
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if sa, sb := a.score(), b.score(); sa != sb {
			return sa > sb
		}
		if la, lb := a.Blocks+a.Assigned, b.Blocks+b.Assigned; la != lb {
			return la < lb
		}
		return a.ID < b.ID
	})
	chosen := spreadHosts(cands, min(want, len(cands)))
	out := make([]string, len(chosen))
	for i, s := range chosen {
		s.Assigned++
		out[i] = s.Addr
	}
	return out, nil
}

// spreadHosts takes n of cands, in order, one per host first, then fills
// up from the rest in order.
func spreadHosts(cands []*Server, n int) []*Server {
	out := make([]*Server, 0, n)
	hosts := make(map[string]bool)
	taken := make([]bool, len(cands))
	for i, s := range cands {
		if len(out) == n {
			return out
		}
		if h := s.hostOf(); !hosts[h] {
			hosts[h], taken[i] = true, true
			out = append(out, s)
		}
	}
	for i, s := range cands {
		if len(out) == n {
			break
		}
		if !taken[i] {
			out = append(out, s)
		}
	}
	return out
}
