package blockmap

import (
	"fmt"
	"slices"
	"sort"
)

// PickFor chooses a live chunkserver to receive a new replica of the
// existing block b (a repair copy), under p's free-space floor, and counts
// the copy against it like a new block. It never chooses a chunkserver
// that holds a replica of b (in any state), one in exclude, or a draining
// one; it prefers a host no replica of b is on, then the most free space
// per block in flight, as Pick does. It returns ErrNotEnoughServers when
// none qualifies. The replicas are read (States) before the servers: a
// replica reported in between is refused by the target (EXISTS).
func (m *Map) PickFor(b BlockID, p Policy, exclude []string) (string, error) {
	holders := m.States(b)
	m.mu.Lock()
	defer m.mu.Unlock()
	holds := make(map[string]bool, len(holders))
	used := make(map[string]bool, len(holders))
	for _, r := range holders {
		holds[r.Addr] = true
		if id, ok := m.mu.byAddr[r.Addr]; ok {
			used[m.mu.servers[id].hostOf()] = true
		}
	}
	var cands []*Server
	for _, s := range m.mu.servers {
		if s.eligible(p) && !holds[s.Addr] && !slices.Contains(exclude, s.Addr) {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: no live chunkserver without a replica of block %d has %d bytes free (%d live, %d excluded)",
			ErrNotEnoughServers, b, p.MinFree, len(m.mu.servers), len(exclude))
	}
	sort.Slice(cands, func(i, j int) bool {
		a, c := cands[i], cands[j]
		if ua, uc := used[a.hostOf()], used[c.hostOf()]; ua != uc {
			return !ua
		}
		if sa, sc := a.score(), c.score(); sa != sc {
			return sa > sc
		}
		if la, lc := a.Blocks+a.Assigned, c.Blocks+c.Assigned; la != lc {
			return la < lc
		}
		return a.ID < c.ID
	})
	cands[0].Assigned++
	return cands[0].Addr, nil
}
