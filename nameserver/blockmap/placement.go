package blockmap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
)

// Usage is what a chunkserver says of its disks, and the host it runs on.
type Usage struct {
	// Host names the machine; "" means the host part of the address.
	Host string
	// Capacity, Used and Free are in bytes, summed over its volumes in
	// service. A Capacity of 0 means the chunkserver cannot tell (its
	// free space is unknown, not nil).
	Capacity, Used, Free int64
	// Volumes are its volumes, by index; none for a chunkserver that
	// lists none (one volume of the sums above).
	Volumes []Volume
}

// ErrNotEnoughServers is returned by Pick when fewer live chunkservers
// with room to spare exist than the policy's minimum.
var ErrNotEnoughServers = errors.New("not enough live chunkservers")

// Policy says which chunkservers a new block may go to.
type Policy struct {
	// MinFree is the free-space floor in bytes: a volume with less free
	// space takes no new replica.
	MinFree int64
	// MaxFill is the most of its capacity a volume is filled to, in
	// (0, 1]: a volume fuller than that takes no new replica. 0 means 1.
	MaxFill float64
	// MinReplicas is the fewest replicas a new block may start with when
	// fewer chunkservers are eligible than wanted; below 1 counts as 1.
	MinReplicas int
}

// Reserve returns the bytes a volume of capacity bytes keeps free: the
// larger of MinFree and (1 - MaxFill) of its capacity.
func (p Policy) Reserve(capacity int64) int64 {
	r := p.MinFree
	if p.MaxFill > 0 && p.MaxFill < 1 {
		r = max(r, int64((1-p.MaxFill)*float64(capacity)))
	}
	return r
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

// headroom is the free space above p's reserve on s's healthy volumes,
// the weight of s in placement; known is false if no volume of s can
// tell its free space (then s is eligible, weighted as the average of
// those that can). A draining chunkserver has none.
func (s *Server) headroom(p Policy) (room float64, known, eligible bool) {
	if s.Draining {
		return 0, false, false
	}
	for _, v := range s.volumes() {
		switch {
		case v.State != VolumeHealthy:
		case v.Capacity == 0:
			eligible = true
		case v.Free > p.Reserve(v.Capacity):
			room += float64(v.Free - p.Reserve(v.Capacity))
			known, eligible = true, true
		}
	}
	return room, known, eligible
}

// candidate is a chunkserver placement may pick, with its weight.
type candidate struct {
	s      *Server
	weight float64
}

// maxWeightRatio bounds a chunkserver's weight in placement to that many
// times the median weight of the candidates: a chunkserver whose room is
// far beyond the others' (a new disk, or one that lies about its free
// space within what Usage.Sanitized lets through) takes more new
// replicas than the others, but not nearly all of them.
const maxWeightRatio = 4

// candidatesLocked returns the live chunkservers that can take a new
// replica under p and that skip does not refuse, weighted by their
// headroom (see headroom), each at most maxWeightRatio times the median.
func (m *Map) candidatesLocked(p Policy, skip func(*Server) bool) []candidate {
	var (
		out     []candidate
		unknown []int
		rooms   []float64
	)
	for _, s := range m.mu.servers {
		room, k, ok := s.headroom(p)
		if !ok || skip(s) {
			continue
		}
		if !k {
			unknown = append(unknown, len(out))
		} else {
			rooms = append(rooms, room)
		}
		out = append(out, candidate{s, room})
	}
	avg := 1.0
	if len(rooms) > 0 {
		slices.Sort(rooms)
		limit := maxWeightRatio * rooms[(len(rooms)-1)/2]
		total := 0.0
		for i := range out {
			out[i].weight = min(out[i].weight, limit)
		}
		for _, r := range rooms {
			total += min(r, limit)
		}
		avg = total / float64(len(rooms))
	}
	for _, i := range unknown {
		out[i].weight = avg
	}
	return out
}

// Pick chooses up to want live chunkservers for a new block. Each replica
// goes to a chunkserver picked at random among those with a volume that
// can take it (healthy, free space above p's reserve), weighted by that
// free space (the shape of HDFS's available-space placement: an emptier
// disk takes more, every disk with room takes its share); no two
// replicas share a chunkserver, nor a host while unused hosts remain.
// Fewer than want (a degraded write) are returned when fewer are
// eligible, as long as there are at least p.MinReplicas (capped at
// want); otherwise the error is ErrNotEnoughServers.
func (m *Map) Pick(want int, p Policy) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cands := m.candidatesLocked(p, func(*Server) bool { return false })
	need := min(max(p.MinReplicas, 1), want)
	if len(cands) < need {
		return nil, fmt.Errorf("%w: want %d (at least %d), have %d of %d live with a volume that has room (%d bytes free, at most %.0f%% full)",
			ErrNotEnoughServers, want, need, len(cands), len(m.mu.servers), p.MinFree, 100*fillOf(p))
	}
	chosen := m.drawLocked(cands, min(want, len(cands)), nil)
	out := make([]string, len(chosen))
	for i, s := range chosen {
		out[i] = s.Addr
	}
	return out, nil
}

func fillOf(p Policy) float64 {
	if p.MaxFill > 0 && p.MaxFill < 1 {
		return p.MaxFill
	}
	return 1
}

// drawLocked draws n of cands at random by weight, without replacement,
// each on a host none of the drawn (nor any of usedHosts) is on while
// there is one.
func (m *Map) drawLocked(cands []candidate, n int, usedHosts map[string]bool) []*Server {
	used := make(map[string]bool, len(usedHosts)+n)
	for h := range usedHosts {
		used[h] = true
	}
	pool := make([]candidate, 0, len(cands))
	out := make([]*Server, 0, n)
	for len(out) < n && len(cands) > 0 {
		pool = pool[:0]
		for _, c := range cands {
			if !used[c.s.hostOf()] {
				pool = append(pool, c)
			}
		}
		if len(pool) == 0 {
			pool = append(pool, cands...)
		}
		s := m.weightedLocked(pool)
		out = append(out, s)
		used[s.hostOf()] = true
		for i, c := range cands {
			if c.s == s {
				cands = append(cands[:i:i], cands[i+1:]...)
				break
			}
		}
	}
	return out
}

// weightedLocked picks one of pool at random, each in proportion to its
// weight (uniformly if none weighs anything).
func (m *Map) weightedLocked(pool []candidate) *Server {
	total := 0.0
	for _, c := range pool {
		total += c.weight
	}
	if total <= 0 {
		return pool[m.mu.rand.IntN(len(pool))].s
	}
	x := m.mu.rand.Float64() * total
	for _, c := range pool {
		if x < c.weight {
			return c.s
		}
		x -= c.weight
	}
	return pool[len(pool)-1].s
}

// newRand returns the map's source of placement choices.
func newRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }
