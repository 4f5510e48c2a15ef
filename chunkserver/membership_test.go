package chunkserver

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func requireProto(t *testing.T, want, got proto.Message) {
	t.Helper()
	require.True(t, proto.Equal(want, got), "want %v, got %v", want, got)
}

// reportedIDs lists the block ids of a report.
func reportedIDs(blocks []*bfspb.ReportedBlock) []int64 {
	var ids []int64
	for _, b := range blocks {
		ids = append(ids, b.BlockId)
	}
	return ids
}

// TestRegisterHeartbeatReport starts a chunkserver on a directory that
// already holds replicas and drives its loop with a fake clock: register
// and full report at start, heartbeats, periodic reports, re-registration
// on request, deletion of obsolete blocks.
func TestRegisterHeartbeatReport(t *testing.T) {
	dir := t.TempDir()
	store, err := blockstore.Open(dir)
	require.NoError(t, err)
	for id := range blockstore.BlockID(3) {
		data := []byte("block")
		require.NoError(t, store.Create(context.Background(), id+1))
		_, err := store.Write(blockstore.Packet{BlockID: id + 1, Seq: 1, Data: data, CRC32C: blockstore.Checksum(data), Last: id < 2, Sync: true, Version: 4})
		require.NoError(t, err)
	}
	require.NoError(t, store.Close())

	ns, nsAddr := startRecorder(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	cs := startChunkServer(t, Config{DataDir: dir, NameServerAddr: nsAddr, Clock: clk,
		HeartbeatInterval: time.Second, ReportInterval: 10 * time.Second})

	ns.wait(t, "register and block report", func() bool { return len(ns.reports) == 1 })
	ns.mu.Lock()
	require.Equal(t, cs.addr, ns.registers[0].Address)
	require.Positive(t, ns.registers[0].CapacityBytes)
	require.Positive(t, ns.registers[0].FreeBytes)
	require.LessOrEqual(t, ns.registers[0].FreeBytes, ns.registers[0].CapacityBytes)
	require.EqualValues(t, 15, ns.registers[0].UsedBytes)
	rep := ns.reports[0]
	require.EqualValues(t, 1, rep.ChunkserverId)
	require.Equal(t, cs.addr, rep.Address)
	require.Equal(t, []int64{1, 2, 3}, reportedIDs(rep.Blocks))
	requireProto(t, &bfspb.ReportedBlock{BlockId: 1, Size: 5, Version: 4, Sealed: true}, rep.Blocks[0])
	require.False(t, rep.Blocks[2].Sealed)
	ns.mu.Unlock()

	// Heartbeats follow the (fake) clock.
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		require.NoError(t, clk.BlockUntil(ctx, 3)) // heartbeat, report and volume check timers
		clk.Advance(time.Second)
		ns.wait(t, "heartbeat", func() bool { return len(ns.heartbeats) == i })
	}
	ns.mu.Lock()
	hb := ns.heartbeats[2]
	require.Positive(t, hb.CapacityBytes)
	hb.CapacityBytes, hb.FreeBytes = 0, 0 // the real disk's; see TestReportsDiskAndHost
	require.Len(t, hb.Volumes, 1)
	hb.Volumes[0].CapacityBytes, hb.Volumes[0].FreeBytes = 0, 0
	requireProto(t, &bfspb.HeartBeatRequest{ChunkserverId: 1, Address: cs.addr, UsedBytes: 15, BlockCount: 3,
		Volumes: []*bfspb.VolumeInfo{{Dir: dir, State: bfspb.VolumeState_VOLUME_STATE_HEALTHY, UsedBytes: 15, Blocks: 3, StateAgeMs: 3000}}}, hb)
	// The next report calls block 2 obsolete.
	ns.obsolete = []int64{2}
	ns.mu.Unlock()

	require.NoError(t, clk.BlockUntil(ctx, 3))
	clk.Advance(7 * time.Second) // 10 s since the start: a periodic report
	ns.wait(t, "periodic report", func() bool { return len(ns.reports) == 2 })
	// The membership goroutine deletes obsolete blocks before it sends the
	// next heartbeat.
	require.NoError(t, clk.BlockUntil(ctx, 3))
	clk.Advance(time.Second)
	ns.wait(t, "heartbeat after the deletion", func() bool { return ns.heartbeats[len(ns.heartbeats)-1].BlockCount == 2 })
	require.Equal(t, []volume.Replica{
		{BlockInfo: blockstore.BlockInfo{ID: 1, Size: 5, Version: 4, Sealed: true}},
		{BlockInfo: blockstore.BlockInfo{ID: 3, Size: 5, Version: 4}},
	}, cs.vols.List())

	// A heartbeat answered with reregister: Register again, full report.
	ns.record(func() { ns.reregister = true })
	require.NoError(t, clk.BlockUntil(ctx, 3))
	clk.Advance(time.Second)
	ns.wait(t, "re-registration", func() bool { return len(ns.registers) == 2 && len(ns.reports) == 3 })
	ns.mu.Lock()
	require.EqualValues(t, 2, ns.reports[2].ChunkserverId)
	require.Equal(t, []int64{1, 3}, reportedIDs(ns.reports[2].Blocks))
	ns.mu.Unlock()
}

// TestBlockReceived checks that a seal, by Seal RPC or by a last packet,
// reaches the nameserver with the right size and version, also when the
// nameserver first answers UNAVAILABLE.
func TestBlockReceived(t *testing.T) {
	ns, nsAddr := startRecorder(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	cs := startChunkServer(t, Config{NameServerAddr: nsAddr, Clock: clk})
	ns.wait(t, "registration", func() bool { return len(ns.reports) == 1 })

	createBlock(t, cs.client, 1)
	st := writeStream(t, cs.client)
	p := packet(1, 1, 0, "one")
	p.Version = 9
	roundTrip(t, st, p)
	// Ended, so its idle timer is not counted among the armed ones below.
	require.NoError(t, st.CloseSend())
	_, err := st.Recv()
	require.ErrorIs(t, err, io.EOF)
	seal, err := cs.client.Seal(context.Background(), &bfspb.SealRequest{BlockId: 1})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, seal.Status)
	require.EqualValues(t, 9, seal.Version)
	ns.wait(t, "BlockReceived after Seal", func() bool {
		b := ns.receivedLocked(1)
		return b != nil && proto.Equal(b, &bfspb.ReportedBlock{BlockId: 1, Size: 3, Version: 9, Sealed: true})
	})
	ns.mu.Lock()
	require.EqualValues(t, 1, ns.received[0].ChunkserverId)
	require.Equal(t, cs.addr, ns.received[0].Address)
	ns.mu.Unlock()

	// The nameserver refuses twice; the reporter retries after backoff.
	ns.record(func() { ns.failReceived = 2 })
	writeBlock(t, cs.client, 2, []byte("second"), 4, true)
	for i := 1; i <= 2; i++ {
		ns.wait(t, "a refused BlockReceived", func() bool { return ns.refused == i })
		require.NoError(t, clk.BlockUntil(context.Background(), 4)) // heartbeat, report, volume check, backoff
		clk.Advance(2 * time.Second)
	}
	ns.wait(t, "BlockReceived after retries", func() bool {
		b := ns.receivedLocked(2)
		return b != nil && b.Size == 6 && b.Sealed
	})
}
