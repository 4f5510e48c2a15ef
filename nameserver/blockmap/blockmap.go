package blockmap

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// ServerID names one registration of a chunkserver; a chunkserver that
// registers again gets a new id. A server that is in the map is live:
// Expire removes the dead.
type ServerID int64

// BlockID names a block.
type BlockID int64

// Replica is one copy of a block on one chunkserver, as last reported.
type Replica struct {
	Addr    string
	Size    int64
	Version uint64
	Sealed  bool
}

// Server is a chunkserver as the map knows it.
type Server struct {
	ID       ServerID
	Addr     string
	LastBeat time.Time
	Blocks   int
	// Usage is the disk as last reported, and the host it is on.
	Usage
	// Assigned counts blocks placed on it since its last report, so a burst
	// of AddBlocks spreads out before reports catch up.
	Assigned int
	// Reported is set by the registration's first full block report.
	Reported bool
	// Draining is set while the chunkserver is being decommissioned: it
	// is chosen by no new write, its replicas stop counting toward their
	// block's replication, and it remains a source for copies and reads.
	// It outlives re-registrations at the same address.
	Draining bool
}

// Map is the block map. See the package documentation.
type Map struct {
	start time.Time
	mu    struct {
		sync.Mutex
		next    ServerID
		servers map[ServerID]*Server
		byAddr  map[string]ServerID
		// blocks maps a block to its replicas, by chunkserver address;
		// held indexes the same replicas by address.
		blocks map[BlockID]map[string]Replica
		held   map[string]map[BlockID]struct{}
		// corrupt holds the replicas reported corrupt, by block and
		// address. A mark outlives reports and re-registrations: only
		// DropReplica and Forget clear it.
		corrupt map[BlockID]map[string]struct{}
		// draining holds the addresses being decommissioned.
		draining map[string]struct{}
	}
}

// New returns an empty map; start is when the nameserver started, which
// bounds how long an address never heard from counts as possibly alive.
func New(start time.Time) *Map {
	m := &Map{start: start}
	m.mu.servers = make(map[ServerID]*Server)
	m.mu.byAddr = make(map[string]ServerID)
	m.mu.blocks = make(map[BlockID]map[string]Replica)
	m.mu.held = make(map[string]map[BlockID]struct{})
	m.mu.corrupt = make(map[BlockID]map[string]struct{})
	m.mu.draining = make(map[string]struct{})
	return m
}

// Register records a chunkserver at addr and returns its new id. An
// earlier registration at the same address is replaced, and the replicas
// it reported are forgotten until the new registration reports.
func (m *Map) Register(addr string, u Usage, now time.Time) ServerID {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.mu.byAddr[addr]; ok {
		m.removeLocked(old)
	}
	m.mu.next++
	id := m.mu.next
	_, draining := m.mu.draining[addr]
	m.mu.servers[id] = &Server{ID: id, Addr: addr, LastBeat: now, Usage: u, Draining: draining}
	m.mu.byAddr[addr] = id
	return id
}

// serverLocked returns the live registration id of the chunkserver at
// addr. A registration names both: ids restart with the nameserver, so a
// chunkserver that kept the id of an earlier run may present the id of
// another chunkserver's registration.
func (m *Map) serverLocked(id ServerID, addr string) (*Server, bool) {
	s, ok := m.mu.servers[id]
	if !ok || s.Addr != addr {
		return nil, false
	}
	return s, true
}

// Heartbeat records that the chunkserver at addr, registered as id, is
// alive. It returns false if that registration is unknown or was declared
// dead: the chunkserver must register again.
func (m *Map) Heartbeat(id ServerID, addr string, u Usage, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.serverLocked(id, addr)
	if !ok {
		return false
	}
	host := s.Host // a heartbeat does not carry it
	s.LastBeat, s.Usage = now, u
	s.Host = host
	return true
}

// Report replaces what the chunkserver at addr, registered as id, holds
// with a full block report. ok is false if that registration is unknown
// or dead; first says this is the registration's first report.
func (m *Map) Report(id ServerID, addr string, replicas map[BlockID]Replica, now time.Time) (first, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.serverLocked(id, addr)
	if !ok {
		return false, false
	}
	first, s.Reported = !s.Reported, true
	m.dropServerReplicasLocked(s.Addr)
	for b, r := range replicas {
		r.Addr = s.Addr
		m.addLocked(b, r)
	}
	s.LastBeat, s.Blocks, s.Assigned = now, len(replicas), 0
	return first, true
}

// Received records replicas that the chunkserver at addr, registered as
// id, has sealed (or otherwise reports one by one). It returns false if
// that registration is unknown or dead.
func (m *Map) Received(id ServerID, addr string, replicas map[BlockID]Replica) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.serverLocked(id, addr)
	if !ok {
		return false
	}
	for b, r := range replicas {
		r.Addr = s.Addr
		if _, had := m.mu.blocks[b][s.Addr]; !had {
			s.Blocks++
		}
		m.addLocked(b, r)
	}
	return true
}

func (m *Map) addLocked(b BlockID, r Replica) {
	reps := m.mu.blocks[b]
	if reps == nil {
		reps = make(map[string]Replica)
		m.mu.blocks[b] = reps
	}
	reps[r.Addr] = r
	held := m.mu.held[r.Addr]
	if held == nil {
		held = make(map[BlockID]struct{})
		m.mu.held[r.Addr] = held
	}
	held[b] = struct{}{}
}

// dropLocked forgets the replica of b at addr.
func (m *Map) dropLocked(b BlockID, addr string) {
	if reps := m.mu.blocks[b]; reps != nil {
		delete(reps, addr)
		if len(reps) == 0 {
			delete(m.mu.blocks, b)
		}
	}
	if held := m.mu.held[addr]; held != nil {
		delete(held, b)
		if len(held) == 0 {
			delete(m.mu.held, addr)
		}
	}
}

// Expire declares dead every live chunkserver silent for longer than
// timeout, forgets their replicas, and returns them.
func (m *Map) Expire(now time.Time, timeout time.Duration) []Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	var dead []Server
	for id, s := range m.mu.servers {
		if now.Sub(s.LastBeat) > timeout {
			dead = append(dead, *s)
			m.removeLocked(id)
		}
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].ID < dead[j].ID })
	return dead
}

func (m *Map) removeLocked(id ServerID) {
	s := m.mu.servers[id]
	if s == nil {
		return
	}
	delete(m.mu.servers, id)
	if m.mu.byAddr[s.Addr] == id {
		delete(m.mu.byAddr, s.Addr)
		m.dropServerReplicasLocked(s.Addr)
	}
}

func (m *Map) dropServerReplicasLocked(addr string) {
	for b := range m.mu.held[addr] {
		m.dropLocked(b, addr)
	}
}

// Dead reports whether the chunkserver at addr is to be given up on: it is
// not registered (never, or declared dead since) and the nameserver has
// been up for longer than timeout.
func (m *Map) Dead(addr string, now time.Time, timeout time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.byAddr[addr]; ok {
		return false
	}
	return now.Sub(m.start) > timeout
}

// Replicas returns the replicas of b on live chunkservers, by address,
// leaving out those marked corrupt, unless every one is: then it returns
// them all (a reader may still find good chunks, and a mistaken report
// must not hide a block).
func (m *Map) Replicas(b BlockID) []Replica {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Replica, 0, len(m.mu.blocks[b]))
	bad := m.mu.corrupt[b]
	for _, r := range m.mu.blocks[b] {
		if _, c := bad[r.Addr]; !c {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		for _, r := range m.mu.blocks[b] {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

// MarkCorrupt marks the replica of b at addr corrupt: it stops counting
// (Replicas leaves it out) but stays known until DropReplica or Forget.
// It returns false if it was marked already.
func (m *Map) MarkCorrupt(b BlockID, addr string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	bad := m.mu.corrupt[b]
	if bad == nil {
		bad = make(map[string]struct{})
		m.mu.corrupt[b] = bad
	}
	if _, ok := bad[addr]; ok {
		return false
	}
	bad[addr] = struct{}{}
	return true
}

// Corrupt returns the addresses of the replicas of b marked corrupt,
// sorted.
func (m *Map) Corrupt(b BlockID) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.mu.corrupt[b]))
	for addr := range m.mu.corrupt[b] {
		out = append(out, addr)
	}
	slices.Sort(out)
	return out
}

// CorruptCount returns how many replicas are marked corrupt.
func (m *Map) CorruptCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, bad := range m.mu.corrupt {
		n += len(bad)
	}
	return n
}

// clearCorruptLocked drops the corrupt mark of the replica of b at addr.
func (m *Map) clearCorruptLocked(b BlockID, addr string) {
	if bad := m.mu.corrupt[b]; bad != nil {
		delete(bad, addr)
		if len(bad) == 0 {
			delete(m.mu.corrupt, b)
		}
	}
}

// DropReplica forgets the replica of b at addr (a stale replica on its
// way to deletion), and its corrupt mark.
func (m *Map) DropReplica(b BlockID, addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clearCorruptLocked(b, addr)
	if _, ok := m.mu.blocks[b][addr]; !ok {
		return
	}
	m.dropLocked(b, addr)
	if id, ok := m.mu.byAddr[addr]; ok {
		m.mu.servers[id].Blocks--
	}
}

// Forget drops everything known about b (its file is gone), corrupt
// marks included.
func (m *Map) Forget(b BlockID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mu.corrupt, b)
	for addr := range m.mu.blocks[b] {
		m.dropLocked(b, addr)
	}
}

// Servers lists the chunkservers, by id.
func (m *Map) Servers() []Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Server, 0, len(m.mu.servers))
	for _, s := range m.mu.servers {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ReplicaState is a replica of a block on a live chunkserver, with what
// the map knows against it.
type ReplicaState struct {
	Replica
	// Corrupt: the replica was reported corrupt (MarkCorrupt).
	Corrupt bool
	// Draining: its chunkserver is being decommissioned.
	Draining bool
}

// Counts reports whether the replica counts toward its block's
// replication: neither corrupt nor on a draining chunkserver.
func (r ReplicaState) Counts() bool { return !r.Corrupt && !r.Draining }

// States returns every replica of b on a live chunkserver, corrupt and
// draining ones included, by address.
func (m *Map) States(b BlockID) []ReplicaState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ReplicaState, 0, len(m.mu.blocks[b]))
	bad := m.mu.corrupt[b]
	for _, r := range m.mu.blocks[b] {
		_, c := bad[r.Addr]
		_, d := m.mu.draining[r.Addr]
		out = append(out, ReplicaState{Replica: r, Corrupt: c, Draining: d})
	}
	slices.SortFunc(out, func(a, b ReplicaState) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

// SetDraining starts (on) or ends the decommission of the chunkserver at
// addr. It returns false if nothing changed. The mark is kept by address,
// so it holds across the chunkserver's restarts.
func (m *Map) SetDraining(addr string, on bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, was := m.mu.draining[addr]
	if was == on {
		return false
	}
	if on {
		m.mu.draining[addr] = struct{}{}
	} else {
		delete(m.mu.draining, addr)
	}
	if id, ok := m.mu.byAddr[addr]; ok {
		m.mu.servers[id].Draining = on
	}
	return true
}

// Held returns the blocks the chunkserver at addr holds, as reported,
// sorted.
func (m *Map) Held(addr string) []BlockID {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]BlockID, 0, len(m.mu.held[addr]))
	for b := range m.mu.held[addr] {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}
