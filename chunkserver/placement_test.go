package chunkserver

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestReportsDiskAndHost: registration carries the host id and the disk's
// capacity and free bytes, and heartbeats carry the disk as it is now.
func TestReportsDiskAndHost(t *testing.T) {
	ns, nsAddr := startRecorder(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	var free atomic.Int64
	free.Store(700)
	disk := func(string) (int64, int64) { return 1000, free.Load() }
	startChunkServer(t, Config{NameServerAddr: nsAddr, Clock: clk, HostID: "rack1-host7",
		HeartbeatInterval: time.Second, ReportInterval: time.Minute,
		TestingKnobs: TestingKnobs{DiskSpace: disk}})
	ns.wait(t, "register", func() bool { return len(ns.reports) == 1 })
	ns.mu.Lock()
	reg := ns.registers[0]
	ns.mu.Unlock()
	require.Equal(t, "rack1-host7", reg.HostId)
	require.EqualValues(t, 1000, reg.CapacityBytes)
	require.EqualValues(t, 700, reg.FreeBytes)

	free.Store(300)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, clk.BlockUntil(ctx, 3)) // heartbeat, report and volume check timers
	clk.Advance(time.Second)
	ns.wait(t, "heartbeat", func() bool { return len(ns.heartbeats) > 0 })
	ns.mu.Lock()
	hb := ns.heartbeats[len(ns.heartbeats)-1]
	ns.mu.Unlock()
	require.EqualValues(t, 1000, hb.CapacityBytes)
	require.EqualValues(t, 300, hb.FreeBytes)
}

// TestNoSpaceIsResourceExhausted: a disk that is full (ENOSPC, inside
// the *PathError a file operation returns) is RESOURCE_EXHAUSTED on the
// wire, never INTERNAL.
func TestNoSpaceIsResourceExhausted(t *testing.T) {
	full := func(int64) error {
		return &os.PathError{Op: "write", Path: "blk_1", Err: syscall.ENOSPC}
	}
	cs := startChunkServer(t, Config{TestingKnobs: TestingKnobs{CreateBlock: full}})
	r, err := cs.client.CreateBlock(context.Background(), &bfspb.CreateBlockRequest{BlockId: 1})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_RESOURCE_EXHAUSTED, r.Status, r.Message)
	code, _ := statusTable.Of(full(1))
	require.Equal(t, bfspb.StatusCode_RESOURCE_EXHAUSTED, code)
}
