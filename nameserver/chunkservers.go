package nameserver

import (
	"errors"
	"maps"
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

// deadList remembers the chunkservers declared dead, as they last were,
// until they register again: the block map forgets them, and an operator
// still wants to see them. It keeps them in the namespace too
// (ChunkserverCmd, through record), so that they are still listed after
// the nameserver restarts, along with every chunkserver that was
// registered before the restart and does not come back within the dead
// timeout. A record is written only when a chunkserver changes between
// registered and dead (or is forgotten), never under the list's mutex; a
// record that fails to be written is logged, and the list in memory
// stands. It is safe for concurrent use.
type deadList struct {
	// record writes a ChunkserverCmd; nil writes nothing.
	record func(*bfspb.ChunkserverCmd)
	mu     struct {
		sync.Mutex
		servers map[string]blockmap.Server
		// recorded is what the namespace holds of each address: true
		// registered, false dead; absent, nothing.
		recorded map[string]bool
		// missing are the chunkservers recorded registered when the
		// nameserver started and not registered since.
		missing map[string]blockmap.Server
	}
}

func newDeadList(record func(*bfspb.ChunkserverCmd)) *deadList {
	d := &deadList{record: record}
	d.mu.servers = make(map[string]blockmap.Server)
	d.mu.recorded = make(map[string]bool)
	d.mu.missing = make(map[string]blockmap.Server)
	return d
}

// load takes in what the namespace recorded before a restart.
func (d *deadList) load(records map[string]*bfspb.ChunkserverRecord) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for addr, r := range records {
		s := blockmap.Server{Addr: addr, LastBeat: time.Unix(0, r.LastHeartbeatNs), Blocks: int(r.Blocks),
			Usage: blockmap.Usage{Host: r.Host, Capacity: r.CapacityBytes, Used: r.UsedBytes, Free: r.FreeBytes}}
		d.mu.recorded[addr] = !r.Dead
		if r.Dead {
			d.mu.servers[addr] = s
		} else {
			d.mu.missing[addr] = s
		}
	}
}

func recordOf(s blockmap.Server, dead bool) *bfspb.ChunkserverRecord {
	return &bfspb.ChunkserverRecord{Host: s.Host, Dead: dead, LastHeartbeatNs: s.LastBeat.UnixNano(),
		CapacityBytes: s.Capacity, UsedBytes: s.Used, FreeBytes: s.Free, Blocks: int64(s.Blocks)}
}

// registered notes that the chunkserver at addr registered: it is no
// longer dead, and the namespace records it (if it did not already).
func (d *deadList) registered(addr, host string, now time.Time) {
	d.mu.Lock()
	delete(d.mu.servers, addr)
	delete(d.mu.missing, addr)
	known := d.mu.recorded[addr]
	d.mu.recorded[addr] = true
	d.mu.Unlock()
	if !known && d.record != nil {
		d.record(&bfspb.ChunkserverCmd{Address: addr,
			Record: recordOf(blockmap.Server{Addr: addr, LastBeat: now, Usage: blockmap.Usage{Host: host}}, false)})
	}
}

// addLocked records dead and returns the addresses forgotten to make
// room.
func (d *deadList) addLocked(dead ...blockmap.Server) []string {
	for _, s := range dead {
		d.mu.servers[s.Addr] = s
		d.mu.recorded[s.Addr] = false
	}
	var forgotten []string
	for len(d.mu.servers) > maxDeadRecords {
		var oldest blockmap.Server
		for _, s := range d.mu.servers {
			if oldest.Addr == "" || s.LastBeat.Before(oldest.LastBeat) {
				oldest = s
			}
		}
		delete(d.mu.servers, oldest.Addr)
		delete(d.mu.recorded, oldest.Addr)
		forgotten = append(forgotten, oldest.Addr)
	}
	return forgotten
}

// write records in the namespace the chunkservers declared dead and
// those forgotten.
func (d *deadList) write(dead []blockmap.Server, forgotten []string) {
	if d.record == nil {
		return
	}
	for _, s := range dead {
		if !slices.Contains(forgotten, s.Addr) {
			d.record(&bfspb.ChunkserverCmd{Address: s.Addr, Record: recordOf(s, true)})
		}
	}
	for _, addr := range forgotten {
		d.record(&bfspb.ChunkserverCmd{Address: addr, Forget: true})
	}
}

// expire calls expire (the block map's Expire) and records the
// chunkservers it declares dead, both under the list's mutex, so that a
// reader (view) never sees a chunkserver gone from the map and not yet
// in the list. The namespace records them after.
func (d *deadList) expire(expire func() []blockmap.Server) []blockmap.Server {
	d.mu.Lock()
	dead := expire()
	forgotten := d.addLocked(dead...)
	d.mu.Unlock()
	d.write(dead, forgotten)
	return dead
}

// expireMissing declares dead the chunkservers registered before the
// nameserver started that have not registered since, once it has been
// up for longer than timeout, and returns them.
func (d *deadList) expireMissing(now, start time.Time, timeout time.Duration) []blockmap.Server {
	if now.Sub(start) <= timeout {
		return nil
	}
	d.mu.Lock()
	dead := slices.Collect(maps.Values(d.mu.missing))
	clear(d.mu.missing)
	forgotten := d.addLocked(dead...)
	d.mu.Unlock()
	d.write(dead, forgotten)
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
		Volumes:            volumeInfos(r.Volumes, max(now.Sub(r.LastBeat), 0)), LastReportAgeMs: -1,
	}
	if !r.LastReport.IsZero() {
		info.LastReportAgeMs = max(now.Sub(r.LastReport), 0).Milliseconds()
	}
	for _, v := range r.Volumes {
		if v.State == blockmap.VolumeFailed {
			info.FailedVolumes++
		} else {
			info.NonDfsUsedBytes += v.NonDFSUsed()
		}
	}
	if len(r.Volumes) == 0 && r.Capacity > 0 {
		info.NonDfsUsedBytes = max(r.Capacity-r.Free-r.Used, 0)
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
// not yet have their file's replication in counting replicas elsewhere
// (blockmap.ReplicaState.Counts). A block of no live file needs nothing,
// nor one of a file still open for write (its writer drops a replica it
// cannot reach); a block whose file cannot be read counts as still to
// move.
func (s *term) blocksToMove(addr string) int64 {
	var n int64
	for _, b := range s.blocks.Held(addr) {
		fb, err := s.ns.Block(int64(b))
		if errors.Is(err, namespace.ErrNotFound) || err == nil && fb.Open {
			continue
		}
		if err != nil {
			glog.V(1).Infof("decommission of %s: block %d: %v", addr, b, err)
			n++
			continue
		}
		counting := 0
		for _, r := range s.blocks.States(b) {
			if r.Addr != addr && r.Counts(fb.Size) {
				counting++
			}
		}
		if counting < fb.Replication {
			n++
		}
	}
	return n
}

// chunkserverCollector exports, at scrape time, each live chunkserver's
// capacity and free bytes, the count of chunkservers by state and of
// their volumes by state.
type chunkserverCollector struct {
	s                         *Server
	capacity, free, cnt, vols *prometheus.Desc
}

func newChunkserverCollector(s *Server) *chunkserverCollector {
	return &chunkserverCollector{
		s: s,
		capacity: prometheus.NewDesc("bfs_nameserver_chunkserver_capacity_bytes",
			"Disk capacity each live chunkserver last reported (0: it cannot tell).", []string{"address"}, nil),
		free: prometheus.NewDesc("bfs_nameserver_chunkserver_free_bytes",
			"Free bytes each live chunkserver last reported.", []string{"address"}, nil),
		cnt: prometheus.NewDesc("bfs_nameserver_chunkservers",
			"Chunkservers by state: live (and not draining), draining (live, being decommissioned), dead (declared dead, or registered before the nameserver restarted and not back within the dead timeout).",
			[]string{"state"}, nil),
		vols: prometheus.NewDesc("bfs_nameserver_volumes",
			"Volumes of the live chunkservers by state: healthy, full (taking no new replica), failed (out of service, its replicas gone).",
			[]string{"state"}, nil),
	}
}

func (c *chunkserverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.capacity
	ch <- c.free
	ch <- c.cnt
	ch <- c.vols
}

func (c *chunkserverCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.s.current()
	if t == nil {
		return // a follower knows no chunkserver
	}
	live := t.blocks.Servers()
	var draining int
	vols := map[blockmap.VolumeState]int{}
	for _, l := range live {
		if l.Draining {
			draining++
		}
		for _, v := range l.Volumes {
			vols[v.State]++
		}
		if len(l.Volumes) == 0 {
			vols[blockmap.VolumeHealthy]++
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
	for _, st := range []blockmap.VolumeState{blockmap.VolumeHealthy, blockmap.VolumeFull, blockmap.VolumeFailed} {
		ch <- prometheus.MustNewConstMetric(c.vols, prometheus.GaugeValue, float64(vols[st]), st.String())
	}
}
