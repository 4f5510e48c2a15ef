package nameserver

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang/glog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// maxDeadRecords bounds the chunkservers remembered as dead; past it the
// one silent the longest is forgotten.
const maxDeadRecords = 10000

// deadList remembers the chunkservers declared dead since the nameserver
// started, as they last were, until they register again: the block map
// forgets them, and an operator still wants to see them. It is in memory
// only. It is safe for concurrent use.
type deadList struct {
	mu struct {
		sync.Mutex
		servers map[string]blockmap.Server
	}
}

func newDeadList() *deadList {
	d := &deadList{}
	d.mu.servers = make(map[string]blockmap.Server)
	return d
}

// add records chunkservers declared dead.
func (d *deadList) add(dead ...blockmap.Server) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addLocked(dead...)
}

func (d *deadList) addLocked(dead ...blockmap.Server) {
	for _, s := range dead {
		d.mu.servers[s.Addr] = s
	}
	for len(d.mu.servers) > maxDeadRecords {
		var oldest blockmap.Server
		for _, s := range d.mu.servers {
			if oldest.Addr == "" || s.LastBeat.Before(oldest.LastBeat) {
				oldest = s
			}
		}
		delete(d.mu.servers, oldest.Addr)
	}
}

// expire calls expire (the block map's Expire) and records the
// chunkservers it declares dead, both under the list's mutex, so that a
// reader (view) never sees a chunkserver gone from the map and not yet
// in the list.
func (d *deadList) expire(expire func() []blockmap.Server) []blockmap.Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	dead := expire()
	d.addLocked(dead...)
	return dead
}

// view calls fn with the dead chunkservers by address, under the list's
// mutex: what fn reads of the block map is consistent with them. fn must
// not keep the map.
func (d *deadList) view(fn func(dead map[string]blockmap.Server)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(d.mu.servers)
}

// remove forgets the chunkserver at addr (it registered again).
func (d *deadList) remove(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.mu.servers, addr)
}

// serverRow is one chunkserver of the report before its drain is judged.
type serverRow struct {
	blockmap.Server
	dead bool
}

// serverRows returns every chunkserver known, live and dead, by address.
func (s *term) serverRows() []serverRow {
	var rows []serverRow
	s.dead.view(func(dead map[string]blockmap.Server) {
		live := s.blocks.Servers()
		rows = make([]serverRow, 0, len(live)+len(dead))
		seen := make(map[string]bool, len(live))
		for _, l := range live {
			rows = append(rows, serverRow{Server: l})
			seen[l.Addr] = true
		}
		for _, d := range dead {
			if !seen[d.Addr] {
				d.Draining = s.blocks.Draining(d.Addr)
				rows = append(rows, serverRow{Server: d, dead: true})
			}
		}
	})
	slices.SortFunc(rows, func(a, b serverRow) int { return strings.Compare(a.Addr, b.Addr) })
	return rows
}

// serverRow returns the chunkserver at addr, live or dead.
func (s *term) serverRow(addr string) (row serverRow, ok bool) {
	s.dead.view(func(dead map[string]blockmap.Server) {
		if l, live := s.blocks.Registered(addr); live {
			row, ok = serverRow{Server: l}, true
		} else if d, gone := dead[addr]; gone {
			d.Draining = s.blocks.Draining(addr)
			row, ok = serverRow{Server: d, dead: true}, true
		}
	})
	return row, ok
}

// chunkserverInfo describes a chunkserver for the report, judging whether
// a draining one is safe to remove.
func (s *term) chunkserverInfo(r serverRow, now time.Time) *bfspb.ChunkserverInfo {
	info := &bfspb.ChunkserverInfo{
		Address: r.Addr, Host: r.HostName(), Draining: r.Draining,
		CapacityBytes: r.Capacity, UsedBytes: r.Used, FreeBytes: r.Free, Blocks: int64(r.Blocks),
		LastHeartbeatAgeMs: max(now.Sub(r.LastBeat), 0).Milliseconds(),
	}
	switch {
	case r.dead:
		info.State = bfspb.ChunkserverState_CHUNKSERVER_STATE_DEAD
	case !r.Draining:
		info.State = bfspb.ChunkserverState_CHUNKSERVER_STATE_LIVE
	default:
		info.BlocksToMove = s.blocksToMove(r.Addr)
		info.State = bfspb.ChunkserverState_CHUNKSERVER_STATE_DRAINING
		if info.BlocksToMove == 0 {
			info.State = bfspb.ChunkserverState_CHUNKSERVER_STATE_DECOMMISSIONED
		}
	}
	return info
}

// blocksToMove counts the blocks the chunkserver at addr holds that do
// not yet have their file's replication in counting replicas elsewhere.
// A block of no live file needs nothing; a block whose file cannot be
// read counts as still to move.
func (s *term) blocksToMove(addr string) int64 {
	var n int64
	files := replicationCache{ns: s.ns, byEntry: map[uint64]uint32{}}
	for _, b := range s.blocks.Held(addr) {
		need, live, err := files.of(int64(b))
		if err != nil {
			glog.V(1).Infof("decommission of %s: block %d: %v", addr, b, err)
			n++
			continue
		}
		if !live {
			continue
		}
		counting := 0
		for _, r := range s.blocks.States(b) {
			if r.Addr != addr && r.Counts() {
				counting++
			}
		}
		if counting < int(need) {
			n++
		}
	}
	return n
}

// replicationCache finds the replication of a block's file, reading each
// file once.
type replicationCache struct {
	ns      *namespace.Store
	byEntry map[uint64]uint32
}

// of returns the replication of block's file; live is false if no file
// has the block.
func (c replicationCache) of(block int64) (replication uint32, live bool, err error) {
	owner, err := c.ns.BlockOwner(block)
	if errors.Is(err, namespace.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if r, ok := c.byEntry[owner]; ok {
		return r, true, nil
	}
	_, info, err := c.ns.PathOf(owner)
	if errors.Is(err, namespace.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	c.byEntry[owner] = info.Replication
	return info.Replication, true, nil
}

// chunkserverCollector exports, at scrape time, each live chunkserver's
// capacity and free bytes and the count of chunkservers by state.
type chunkserverCollector struct {
	s                   *Server
	capacity, free, cnt *prometheus.Desc
}

func newChunkserverCollector(s *Server) *chunkserverCollector {
	return &chunkserverCollector{
		s: s,
		capacity: prometheus.NewDesc("bfs_nameserver_chunkserver_capacity_bytes",
			"Disk capacity each live chunkserver last reported (0: it cannot tell).", []string{"address"}, nil),
		free: prometheus.NewDesc("bfs_nameserver_chunkserver_free_bytes",
			"Free bytes each live chunkserver last reported.", []string{"address"}, nil),
		cnt: prometheus.NewDesc("bfs_nameserver_chunkservers",
			"Chunkservers by state: live (and not draining), draining (live, being decommissioned), dead (declared dead since the nameserver started, not back).",
			[]string{"state"}, nil),
	}
}

func (c *chunkserverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.capacity
	ch <- c.free
	ch <- c.cnt
}

func (c *chunkserverCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.s.current()
	if t == nil {
		return // a follower knows no chunkserver
	}
	live := t.blocks.Servers()
	var draining int
	for _, l := range live {
		if l.Draining {
			draining++
		}
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(l.Capacity), l.Addr)
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(l.Free), l.Addr)
	}
	dead := 0
	t.dead.view(func(gone map[string]blockmap.Server) {
		for addr := range gone {
			if _, back := t.blocks.Registered(addr); !back {
				dead++
			}
		}
	})
	ch <- prometheus.MustNewConstMetric(c.cnt, prometheus.GaugeValue, float64(len(live)-draining), "live")
	ch <- prometheus.MustNewConstMetric(c.cnt, prometheus.GaugeValue, float64(draining), "draining")
	ch <- prometheus.MustNewConstMetric(c.cnt, prometheus.GaugeValue, float64(dead), "dead")
}
