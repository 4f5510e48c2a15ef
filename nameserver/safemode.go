package nameserver

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/golang/glog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// DefaultSafeModeThreshold is the share of the blocks the namespace knows
// that must have a reported replica before safe mode ends by itself.
const DefaultSafeModeThreshold = 0.999

// safeMode holds every replica deletion after a start until the block
// reports cover enough of the blocks the namespace knows and enough
// chunkservers have reported, or an operator ends it: a nameserver that
// has heard from few chunkservers cannot tell a missing replica from a
// lost one, and must not act on what it does not know yet. Deletes asked for meanwhile are held (later) and carried
// out when it ends; the repair scheduler waits for it too. It is safe
// for concurrent use.
type safeMode struct {
	// on is read on every delete; it only ever goes from true to false.
	on        atomic.Bool
	threshold float64
	// minServers chunkservers must have reported, as servers counts them.
	minServers int
	servers    func() int
	mu         struct {
		sync.Mutex
		// pending holds the known blocks no report has named yet; nil
		// once safe mode is over.
		pending map[int64]struct{}
		known   int64
		// reported is the count of known blocks reported when safe mode
		// ended.
		reported int64
		// byOperator is true if an operator ended safe mode.
		byOperator bool
		// held are the replica deletes asked for while in safe mode, run
		// when it ends (see later).
		held []func()
	}
}

// SafeModeStatus is what GetSafeMode reports.
type SafeModeStatus struct {
	On              bool
	Known, Reported int64
	Threshold       float64
	LeftByOperator  bool
	// MinServers chunkservers must have reported; Servers have.
	MinServers, Servers int
}

// newSafeMode starts safe mode over the blocks known, waiting for
// minServers chunkservers to have sent a full report, as servers counts
// them; with nothing to wait for (no block nor chunkserver) it is over at
// once.
func newSafeMode(threshold float64, known []int64, minServers int, servers func() int) *safeMode {
	m := &safeMode{threshold: threshold, minServers: minServers, servers: servers}
	m.mu.pending = make(map[int64]struct{}, len(known))
	for _, id := range known {
		m.mu.pending[id] = struct{}{}
	}
	m.mu.known = int64(len(m.mu.pending))
	m.on.Store(true)
	m.mu.Lock()
	m.checkLocked() // nothing is held yet
	m.mu.Unlock()
	return m
}

// On reports whether replica deletion is held.
func (m *safeMode) On() bool { return m.on.Load() }

// later holds fn, an action on replicas (a delete), until
// safe mode ends, and reports whether it did; if safe mode is over it
// returns false and the caller acts at once. fn must not block: it runs
// on the goroutine that ends safe mode.
func (m *safeMode) later(fn func()) bool {
	if !m.On() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.pending == nil {
		return false
	}
	m.mu.held = append(m.mu.held, fn)
	return true
}

// Reported notes that a chunkserver holds a replica of each of ids.
func (m *safeMode) Reported(ids []int64) {
	m.update(func() {
		for _, id := range ids {
			delete(m.mu.pending, id)
		}
	})
}

// Recheck ends safe mode if enough has been reported: a chunkserver
// finished a full report.
func (m *safeMode) Recheck() { m.update(func() {}) }

// update runs fn under the mutex while safe mode is on, then ends it if
// enough has been reported.
func (m *safeMode) update(fn func()) {
	if !m.On() {
		return
	}
	m.mu.Lock()
	if m.mu.pending == nil {
		m.mu.Unlock()
		return
	}
	fn()
	held := m.checkLocked()
	m.mu.Unlock()
	runHeld(held)
}

// Leave ends safe mode at an operator's word.
func (m *safeMode) Leave() {
	m.mu.Lock()
	if m.mu.pending == nil {
		m.mu.Unlock()
		return
	}
	m.mu.byOperator = true
	glog.Warningf("safe mode left by an operator with %d of %d known blocks reported", m.reportedLocked(), m.mu.known)
	held := m.endLocked()
	m.mu.Unlock()
	runHeld(held)
}

// runHeld runs the actions held during safe mode, once it is over.
func runHeld(held []func()) {
	if len(held) > 0 {
		glog.Infof("safe mode over: carrying out %d replica deletes held meanwhile", len(held))
	}
	for _, fn := range held {
		fn()
	}
}

// Status returns the current state.
func (m *safeMode) Status() SafeModeStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return SafeModeStatus{On: m.mu.pending != nil, Known: m.mu.known, Reported: m.reportedLocked(),
		Threshold: m.threshold, LeftByOperator: m.mu.byOperator, MinServers: m.minServers, Servers: m.servers()}
}

func (m *safeMode) reportedLocked() int64 {
	if m.mu.pending == nil {
		return m.mu.reported
	}
	return m.mu.known - int64(len(m.mu.pending))
}

// checkLocked ends safe mode if enough blocks and chunkservers are
// reported, returning the actions it held.
func (m *safeMode) checkLocked() []func() {
	if float64(m.reportedLocked()) < m.threshold*float64(m.mu.known) {
		return nil
	}
	servers := m.servers()
	if servers < m.minServers {
		return nil
	}
	glog.Infof("safe mode over: %d of %d known blocks reported (threshold %v), %d chunkservers (%d wanted)",
		m.reportedLocked(), m.mu.known, m.threshold, servers, m.minServers)
	return m.endLocked()
}

// endLocked keeps the final count of reported blocks for Status and
// returns the actions held, for the caller to run once it unlocks.
func (m *safeMode) endLocked() []func() {
	m.mu.reported, m.mu.pending = m.reportedLocked(), nil
	m.on.Store(false)
	held := m.mu.held
	m.mu.held = nil
	return held
}

// safeModeCollectors exports the state status reads as gauges.
func safeModeCollectors(status func() SafeModeStatus) []prometheus.Collector {
	gauge := func(name, help string, f func(SafeModeStatus) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(status()) })
	}
	return []prometheus.Collector{
		gauge("bfs_nameserver_safemode", "1 while the nameserver is in safe mode (no replica is deleted), 0 after.",
			func(s SafeModeStatus) float64 {
				if s.On {
					return 1
				}
				return 0
			}),
		gauge("bfs_nameserver_safemode_known_blocks", "Blocks the namespace knew when safe mode began.",
			func(s SafeModeStatus) float64 { return float64(s.Known) }),
		gauge("bfs_nameserver_safemode_reported_blocks", "Known blocks with at least one reported replica.",
			func(s SafeModeStatus) float64 { return float64(s.Reported) }),
	}
}

// startSafeMode enters safe mode over every block the namespace knows.
func (s *term) startSafeMode() error {
	var known []int64
	if err := s.ns.BlockIDs(func(id int64) { known = append(known, id) }); err != nil {
		return err
	}
	s.safe = newSafeMode(s.cfg.SafeModeThreshold, known, s.cfg.SafeModeMinChunkservers, s.reportedChunkservers)
	if s.safe.On() {
		glog.Infof("in safe mode: no replica is deleted until %.2f%% of %d known blocks and %d chunkservers are reported (or bfs admin safemode leave)",
			100*s.cfg.SafeModeThreshold, len(known), s.cfg.SafeModeMinChunkservers)
	}
	glog.Infof("cluster id %s", s.ns.ClusterID())
	return nil
}

// GetSafeMode reports the safe mode state.
func (srv *Server) GetSafeMode(ctx context.Context, _ *bfspb.GetSafeModeRequest) (*bfspb.GetSafeModeResponse, error) {
	s, notLeader := leading[*bfspb.GetSafeModeResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	st := s.safe.Status()
	return &bfspb.GetSafeModeResponse{On: st.On, KnownBlocks: st.Known, ReportedBlocks: st.Reported,
		Threshold: st.Threshold, LeftByOperator: st.LeftByOperator,
		MinChunkservers: int64(st.MinServers), ReportedChunkservers: int64(st.Servers)}, nil
}

// reportedChunkservers counts the live chunkservers whose first full
// block report since they registered is in.
func (s *term) reportedChunkservers() int {
	n := 0
	for _, cs := range s.blocks.Servers() {
		if cs.Reported {
			n++
		}
	}
	return n
}

// LeaveSafeMode ends safe mode at once.
func (srv *Server) LeaveSafeMode(ctx context.Context, _ *bfspb.LeaveSafeModeRequest) (*bfspb.LeaveSafeModeResponse, error) {
	s, notLeader := leading[*bfspb.LeaveSafeModeResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	s.safe.Leave()
	return &bfspb.LeaveSafeModeResponse{}, nil
}

// ClusterID returns the id of the cluster the nameserver's data directory
// belongs to.
func (s *Server) ClusterID() string { return s.ns.ClusterID() }
