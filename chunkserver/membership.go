package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/millis"
	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// rpcTimeout bounds every call to the nameserver, so a hung nameserver
// delays a retry, never stops it.
const rpcTimeout = 10 * time.Second

// Backoff (jittered, see retry.New) between registration attempts, so
// chunkservers retrying after a nameserver restart spread out.
const (
	registerRetryMin = 50 * time.Millisecond
	registerRetryMax = 5 * time.Second
)

// registry is the part of the nameserver the membership loop calls.
type registry interface {
	Register(ctx context.Context, in *bfspb.RegisterRequest, opts ...grpc.CallOption) (*bfspb.RegisterResponse, error)
	HeartBeat(ctx context.Context, in *bfspb.HeartBeatRequest, opts ...grpc.CallOption) (*bfspb.HeartBeatResponse, error)
	BlockReport(ctx context.Context, in *bfspb.BlockReportRequest, opts ...grpc.CallOption) (*bfspb.BlockReportResponse, error)
}

// membership is the chunkserver's standing with the nameserver: it
// registers, heartbeats and sends full block reports, and it knows the
// chunkserver id the other nameserver calls carry.
type membership struct {
	ns      registry
	vols    *volume.Set
	cluster *cluster
	clock   clock.Clock
	metrics *metrics
	// keys take the block-token keys of every answer that carries them.
	keys   *blocktoken.Keyring
	hostID string
	// writers counts the write streams open, for heartbeats.
	writers func() int64
	// page is how many replicas a block report message carries
	// (DefaultReportPage if not positive).
	page int

	// Set by Serve before run starts, read-only afterwards.
	addr        string
	hb, reports time.Duration

	// id is the chunkserver id of the current registration (0 before).
	id atomic.Int64
	// registered is closed at the first registration.
	registered     chan struct{}
	registeredOnce sync.Once
	// kick asks for a heartbeat now: a volume changed state.
	kick chan struct{}
}

// kickHeartbeat has the next heartbeat sent at once; it never blocks.
func (m *membership) kickHeartbeat() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run registers, then heartbeats and reports until ctx ends, registering
// again whenever the nameserver asks.
func (m *membership) run(ctx context.Context) {
	for m.register(ctx) && m.serve(ctx) {
	}
}

// register retries until the nameserver accepts the chunkserver; it
// returns false if ctx ends first.
func (m *membership) register(ctx context.Context) bool {
	bo := retry.New(registerRetryMin, registerRetryMax)
	for {
		resp, err := m.tryRegister(ctx)
		if err == nil {
			err = m.cluster.Join(resp.ClusterId)
		}
		if err == nil {
			err = m.cluster.Term(resp.Term)
		}
		switch {
		case err == nil:
			m.adopt(resp)
			return true
		case errors.Is(err, errWrongCluster):
			glog.Errorf("register with the nameserver as %s refused: %v", m.addr, err)
		case ctx.Err() == nil:
			glog.Warningf("register with the nameserver as %s: %v", m.addr, err)
		}
		if !retry.Sleep(ctx, m.clock, bo) {
			return false
		}
	}
}

func (m *membership) tryRegister(ctx context.Context) (*bfspb.RegisterResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	d := m.disks()
	resp, err := m.ns.Register(ctx, &bfspb.RegisterRequest{
		Address: m.addr, CapacityBytes: d.capacity, UsedBytes: d.used, FreeBytes: d.free,
		ClusterId: m.cluster.ID(), HostId: m.hostID, Volumes: d.volumes,
	})
	m.metrics.nsCall("Register", resp.GetStatus(), err)
	switch {
	case err != nil:
	case resp.Status == bfspb.StatusCode_WRONG_CLUSTER:
		err = fmt.Errorf("%w: the nameserver says: %s", errWrongCluster, resp.Message)
	case resp.Status != bfspb.StatusCode_OK:
		err = errors.New(resp.Status.String() + ": " + resp.Message)
	}
	return resp, err
}

// disks is what a registration or a heartbeat says of the volumes.
type disks struct {
	capacity, used, free, blocks int64
	volumes                      []*bfspb.VolumeInfo
}

// disks describes the volumes; the sums are over those in service.
func (m *membership) disks() disks {
	var d disks
	now := m.clock.Now()
	for _, st := range m.vols.Status() {
		if st.State != volume.Failed {
			d.capacity, d.used, d.free, d.blocks = d.capacity+st.Capacity, d.used+st.Used, d.free+st.Free, d.blocks+st.Blocks
		}
		d.volumes = append(d.volumes, &bfspb.VolumeInfo{
			Index: uint32(st.Index), Dir: st.Dir, State: volumeStates[st.State], Reason: st.Reason,
			CapacityBytes: st.Capacity, FreeBytes: st.Free, UsedBytes: st.Used, Blocks: st.Blocks,
			StateAgeMs: max(now.Sub(st.Since), 0).Milliseconds(),
		})
	}
	return d
}

var volumeStates = map[volume.State]bfspb.VolumeState{
	volume.Healthy: bfspb.VolumeState_VOLUME_STATE_HEALTHY,
	volume.Full:    bfspb.VolumeState_VOLUME_STATE_FULL,
	volume.Failed:  bfspb.VolumeState_VOLUME_STATE_FAILED,
}

func (m *membership) adopt(resp *bfspb.RegisterResponse) {
	m.keys.Set(resp.BlockKeys)
	m.adoptPolicy(resp.MinFreeBytes, resp.MaxVolumeFill)
	m.id.Store(resp.ChunkserverId)
	m.hb = askedInterval("heartbeat", resp.HeartbeatIntervalMs, m.hb)
	m.reports = askedInterval("block report", resp.ReportIntervalMs, m.reports)
	m.registeredOnce.Do(func() { close(m.registered) })
	glog.Infof("registered with the nameserver as chunkserver %d (%s), heartbeat every %v, block report every %v",
		resp.ChunkserverId, m.addr, m.hb, m.reports)
}

// adoptPolicy has the volumes keep free what the nameserver's placement
// policy asks, unless it asks what no volume can follow (a negative
// floor, a fill ratio outside [0, 1]), which is logged.
func (m *membership) adoptPolicy(minFree int64, maxFill float64) {
	if minFree < 0 || !(maxFill >= 0 && maxFill <= 1) {
		glog.Warningf("the nameserver asks volumes to keep %d bytes free and fill to %v: keeping the policy as it was", minFree, maxFill)
		return
	}
	m.vols.SetPolicy(volume.Policy{MinFree: minFree, MaxFill: maxFill})
}

// askedInterval is the interval the nameserver asks for in ms, or cur
// when it asks none (0) or one no timer can follow (negative, or beyond
// a time.Duration), which is logged.
func askedInterval(what string, ms int64, cur time.Duration) time.Duration {
	if ms == 0 {
		return cur
	}
	d, ok := millis.Duration(ms)
	if !ok || d < 0 {
		glog.Warningf("the nameserver asks for a %s interval of %d ms; keeping %v", what, ms, cur)
		return cur
	}
	return d
}

// serve sends a full block report, then heartbeats and reports on their
// intervals. It returns true when the nameserver asks the chunkserver to
// register again, false when ctx ends. A failed report is retried at the
// next heartbeat.
func (m *membership) serve(ctx context.Context) bool {
	hb, rep := m.clock.NewTimer(m.hb), m.clock.NewTimer(m.reports)
	defer hb.Stop()
	defer rep.Stop()
	due := true
	for {
		if due {
			due = !m.blockReport(ctx)
		}
		select {
		case <-ctx.Done():
			return false
		case <-rep.C():
			rep.Reset(m.reports)
			due = true
		case <-hb.C():
			hb.Reset(m.hb)
			if m.heartbeat(ctx) {
				return true
			}
		case <-m.kick:
			hb.Reset(m.hb)
			if m.heartbeat(ctx) {
				return true
			}
		}
	}
}

// heartbeat reports whether the nameserver asked to register again.
func (m *membership) heartbeat(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	d := m.disks()
	resp, err := m.ns.HeartBeat(ctx, &bfspb.HeartBeatRequest{
		ChunkserverId: m.id.Load(), Address: m.addr,
		UsedBytes: d.used, BlockCount: d.blocks, PendingWrites: m.writers(),
		CapacityBytes: d.capacity, FreeBytes: d.free, Volumes: d.volumes,
	})
	m.metrics.nsCall("HeartBeat", resp.GetStatus(), err)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			glog.Warningf("heartbeat: %v", err)
		}
		return false
	case resp.Reregister:
		glog.Infof("the nameserver asks chunkserver %d to register again (%v %s)", m.id.Load(), resp.Status, resp.Message)
		return true
	case resp.Status == bfspb.StatusCode_OK:
		if err := m.cluster.Term(resp.Term); err != nil {
			// An older leader than one heard of before: register with
			// whoever leads now.
			glog.Warningf("heartbeat: %v", err)
			return true
		}
		m.keys.Set(resp.BlockKeys)
	case resp.Status != bfspb.StatusCode_OK:
		glog.Warningf("heartbeat: %v %s", resp.Status, resp.Message)
	}
	return false
}

// blockReport sends every replica to the nameserver, in pages, and
// deletes those it calls obsolete, page by page. It reports whether the
// nameserver took the whole report; a report that fails part way is
// sent again from its first page.
func (m *membership) blockReport(ctx context.Context) bool {
	return m.sendReport(ctx, m.vols.List())
}

// sendReport sends infos as a full block report.
func (m *membership) sendReport(ctx context.Context, infos []volume.Replica) bool {
	pages := reportPages(infos, m.page)
	report := rand.Uint64()
	obsolete := 0
	for i, page := range pages {
		req := &bfspb.BlockReportRequest{ChunkserverId: m.id.Load(), Address: m.addr,
			Blocks: page, ReportId: report, Page: uint32(i), More: i < len(pages)-1}
		n, err := m.reportPage(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				glog.Warningf("block report of %d blocks, page %d of %d: %v", len(infos), i+1, len(pages), err)
			}
			return false
		}
		obsolete += n
	}
	glog.V(1).Infof("block report of %d blocks in %d pages taken, %d obsolete", len(infos), len(pages), obsolete)
	return true
}

// reportPages cuts a report into pages of at most size replicas (of
// DefaultReportPage if size is not positive); an empty report is one
// empty page.
func reportPages(infos []volume.Replica, size int) [][]*bfspb.ReportedBlock {
	if size <= 0 {
		size = DefaultReportPage
	}
	pages := make([][]*bfspb.ReportedBlock, 0, (len(infos)+size-1)/size)
	for chunk := range slices.Chunk(infos, size) {
		page := make([]*bfspb.ReportedBlock, len(chunk))
		for i, info := range chunk {
			page[i] = reported(info)
		}
		pages = append(pages, page)
	}
	if len(pages) == 0 {
		pages = append(pages, nil)
	}
	return pages
}

// reportPage sends one page of a block report and deletes the replicas
// the nameserver calls obsolete in its answer; it returns how many.
func (m *membership) reportPage(ctx context.Context, req *bfspb.BlockReportRequest) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := m.ns.BlockReport(ctx, req)
	m.metrics.nsCall("BlockReport", resp.GetStatus(), err)
	if err == nil && resp.Status != bfspb.StatusCode_OK {
		err = errors.New(resp.Status.String() + ": " + resp.Message)
	}
	if err != nil {
		return 0, err
	}
	if err := m.cluster.Check(resp.ClusterId); err != nil {
		// Only a nameserver of this chunkserver's own cluster decides
		// what is obsolete.
		if len(resp.Obsolete) > 0 {
			glog.Errorf("not deleting %d blocks called obsolete: %v", len(resp.Obsolete), err)
		}
		return 0, nil
	}
	m.deleteObsolete(resp.Obsolete)
	return len(resp.Obsolete), nil
}

func (m *membership) deleteObsolete(ids []int64) {
	for _, id := range ids {
		err := m.vols.Delete(blockstore.BlockID(id))
		switch {
		case err == nil:
			glog.Infof("deleted block %d: obsolete", id)
		case !errors.Is(err, blockstore.ErrNotFound):
			glog.Errorf("delete obsolete block %d: %v", id, err)
		}
	}
}

func reported(r volume.Replica) *bfspb.ReportedBlock {
	return &bfspb.ReportedBlock{BlockId: int64(r.ID), Size: r.Size, Version: r.Version, Sealed: r.Sealed, Volume: uint32(r.Volume)}
}
