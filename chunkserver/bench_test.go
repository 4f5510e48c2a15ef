package chunkserver

import (
	"context"
	"testing"
	"time"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// BenchmarkWriteStream puts 64 KiB packets through one Write stream to a
// chunkserver over loopback gRPC, without waiting for each ack, 64 MiB per
// block sealed by its last packet.
func BenchmarkWriteStream(b *testing.B) {
	cs := startChunkServer(b, Config{})
	const packet, perBlock = 64 << 10, 1024
	data := make([]byte, packet)
	crc := blockstore.Checksum(data)
	b.SetBytes(packet)
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(perBlock, b.N-done)
		if _, err := cs.client.CreateBlock(context.Background(), &bfspb.CreateBlockRequest{BlockId: int64(done + 1)}); err != nil {
			b.Fatal(err)
		}
		st, err := cs.client.Write(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			for seq := int64(1); seq <= int64(n); seq++ {
				p := &bfspb.WritePacket{BlockId: int64(done + 1), Seq: seq, Offset: (seq - 1) * packet, Data: data, Crc32C: crc, Last: seq == int64(n)}
				if err := st.Send(p); err != nil {
					errc <- err
					return
				}
			}
			errc <- st.CloseSend()
		}()
		for range n {
			ack, err := st.Recv()
			if err != nil || ack.Status != bfspb.StatusCode_OK {
				b.Fatal(ack, err)
			}
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		done += n
	}
}

// BenchmarkSealToBlockReceived measures the time from sending a Seal for
// a block with unsynced bytes to the nameserver (a recording peer)
// receiving BlockReceived for it.
func BenchmarkSealToBlockReceived(b *testing.B) {
	ns, nsAddr := startRecorder(b)
	cs := startChunkServer(b, Config{NameServerAddr: nsAddr})
	ns.wait(b, "registration", func() bool { return len(ns.reports) == 1 })
	ctx := context.Background()
	var total, sealRPC time.Duration
	data := make([]byte, 64<<10)
	crc := blockstore.Checksum(data)
	b.ResetTimer()
	for i := range b.N {
		id := int64(i + 1)
		b.StopTimer()
		createBlock(b, cs.client, id)
		st, err := cs.client.Write(ctx)
		if err == nil {
			err = st.Send(&bfspb.WritePacket{BlockId: id, Seq: 1, Data: data, Crc32C: crc})
		}
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := cs.client.Seal(ctx, &bfspb.SealRequest{BlockId: id}); err != nil {
			b.Fatal(err)
		}
		sealRPC += time.Since(start)
		ns.wait(b, "BlockReceived", func() bool { return ns.receivedLocked(id) != nil })
		total += time.Since(start)
		st.CloseSend()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/seal")
	b.ReportMetric(float64(sealRPC.Microseconds())/float64(b.N), "µs/seal-rpc")
}
