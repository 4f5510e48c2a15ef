package blockmap

import (
	"fmt"
	"slices"
)

// PickFor chooses a live chunkserver to receive a new replica of the
// existing block b (a repair copy), under p, as Pick does: at random
// among those with a volume that has room, weighted by that room. It
// never chooses a chunkserver that holds a replica of b (in any state),
// one in exclude, or a draining one, and it prefers a host no replica of
// b is on. It returns ErrNotEnoughServers when none qualifies. The
// replicas are read (States) before the servers: a replica reported in
// between is refused by the target (EXISTS).
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
	cands := m.candidatesLocked(p, func(s *Server) bool { return holds[s.Addr] || slices.Contains(exclude, s.Addr) })
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: no live chunkserver without a replica of block %d has a volume with room (%d bytes free, at most %.0f%% full; %d live, %d excluded)",
			ErrNotEnoughServers, b, p.MinFree, 100*fillOf(p), len(m.mu.servers), len(exclude))
	}
	return m.drawLocked(cands, 1, used)[0].Addr, nil
}
