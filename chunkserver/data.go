package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/proto/bfspb"
)

const (
	// readChunkSize is the most data one ReadChunk carries.
	readChunkSize = 1 << 20
	// ackQueue is how many acknowledgements may wait for the sender, so
	// applying packets does not wait for the network.
	ackQueue = 64
)

// Write applies a stream of packets of one block, acknowledging each in
// order. Packets are applied on this goroutine; acks are sent from
// another, so the disk and the network work at the same time.
func (s *Server) Write(stream grpc.BidiStreamingServer[bfspb.WritePacket, bfspb.WriteAck]) error {
	s.writers.Add(1)
	defer s.writers.Add(-1)
	defer s.clients.start()()
	acks := make(chan *bfspb.WriteAck, ackQueue)
	sent := make(chan error, 1)
	go func() { sent <- sendAcks(stream, acks) }()
	err := s.applyStream(stream, acks)
	close(acks)
	if serr := <-sent; err == nil {
		err = serr
	}
	return err
}

// sendAcks sends acks until the channel closes; after a failed send it
// keeps draining, so the applier never blocks on a dead stream.
func sendAcks(stream grpc.BidiStreamingServer[bfspb.WritePacket, bfspb.WriteAck], acks <-chan *bfspb.WriteAck) error {
	var err error
	for a := range acks {
		if err == nil {
			err = stream.Send(a)
		}
	}
	return err
}

func (s *Server) applyStream(stream grpc.BidiStreamingServer[bfspb.WritePacket, bfspb.WriteAck], acks chan<- *bfspb.WriteAck) error {
	var (
		in    inPacket
		block blockstore.BlockID // the stream's block, set by its first packet
		first = true
		// The store tells the replica's sequence numbers only to the stream
		// that wrote its last packet.
		writer = blockstore.WriterID(s.streams.Add(1))
		// refused is why the stream may not write (its token), checked
		// at its first packet: every packet is then refused with it.
		refused error
	)
	for {
		// RecvMsg into an inPacket: the codec decodes it without a copy
		// of its data beyond the one out of the transport.
		err := stream.RecvMsg(&in)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if first {
			block, first = in.p.BlockID, false
			refused = s.authorize(stream.Context(), int64(block), bfspb.BlockAccess_BLOCK_ACCESS_WRITE)
		}
		in.p.Writer = writer
		var ack *bfspb.WriteAck
		if refused != nil {
			code, msg := statusTable.Of(refused)
			ack = &bfspb.WriteAck{BlockId: int64(in.p.BlockID), Seq: in.p.Seq, Status: code, Message: msg}
		} else {
			ack = s.applyPacket(&in.p, block)
		}
		s.codec.release(&in)
		acks <- ack
	}
}

func (s *Server) applyPacket(p *blockstore.Packet, block blockstore.BlockID) *bfspb.WriteAck {
	start := time.Now()
	var (
		size int64
		err  error
	)
	if p.BlockID != block {
		err = fmt.Errorf("%w: packet of block %d on the stream of block %d", errOtherBlock, p.BlockID, block)
	} else {
		size, err = s.vols.Write(*p)
	}
	code, msg := statusTable.Of(err)
	s.metrics.packetLatency.WithLabelValues(packetKind(p)).Observe(time.Since(start).Seconds())
	s.metrics.packets.WithLabelValues(code.String()).Inc()
	if err == nil {
		s.metrics.written.Add(float64(len(p.Data)))
		if p.Last {
			s.metrics.seals.Inc()
			s.sealed(p.BlockID)
		}
	}
	return &bfspb.WriteAck{BlockId: int64(p.BlockID), Seq: p.Seq, Status: code, Size: size, Message: msg}
}

func packetKind(p *blockstore.Packet) string {
	switch {
	case p.Last:
		return "last"
	case p.Sync:
		return "sync"
	}
	return "plain"
}

// sealed queues the BlockReceived report of a sealed replica.
func (s *Server) sealed(id blockstore.BlockID) {
	if s.reporter == nil {
		return
	}
	if info, err := s.vols.Info(id); err == nil && info.Sealed {
		s.reporter.add(volume.Replica{BlockInfo: info, Volume: s.vols.Volume(id)})
	}
}

// Read streams a range of a replica in chunks of at most 1 MiB; a length
// of 0 reads to the end. Every chunk is verified on disk first; a damaged
// one ends the stream with a CORRUPT chunk, never bad bytes. Each chunk
// carries the CRC32C of its bytes, for the receiver to check.
//
// A copy's read (req.Copy: another chunkserver re-making the replica for
// the repair) is held to the copy rate while this chunkserver's clients
// are busy; a client's read counts as one.
func (s *Server) Read(req *bfspb.ReadRequest, stream grpc.ServerStreamingServer[bfspb.ReadChunk]) error {
	if !req.Copy {
		defer s.clients.start()()
	}
	if err := s.authorize(stream.Context(), req.BlockId, bfspb.BlockAccess_BLOCK_ACCESS_READ); err != nil {
		return sendReadError(stream, req.Offset, err)
	}
	id := blockstore.BlockID(req.BlockId)
	info, err := s.vols.Info(id)
	if err == nil && (req.Offset < 0 || req.Offset > info.Size || req.Length < 0) {
		err = fmt.Errorf("%w: read of %d bytes at %d of block %d (%d bytes)", blockstore.ErrInvalid, req.Length, req.Offset, id, info.Size)
	}
	if err != nil {
		return sendReadError(stream, req.Offset, err)
	}
	end := info.Size
	if req.Length > 0 {
		end = min(req.Offset+req.Length, end)
	}
	for off := req.Offset; off < end; {
		// A fresh buffer each time: gRPC may still hold a sent message.
		buf := make([]byte, min(readChunkSize, end-off))
		if req.Copy {
			if err := s.copies.wait(stream.Context(), len(buf)); err != nil {
				return err
			}
		}
		n, err := s.vols.ReadAt(id, buf, off)
		if n > 0 {
			chunk := &bfspb.ReadChunk{Offset: off, Data: buf[:n], Crc32C: blockstore.Checksum(buf[:n])}
			if err := stream.Send(chunk); err != nil {
				return err
			}
			s.metrics.read.Add(float64(n))
			off += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return nil // truncated while we read
		}
		if err != nil {
			if errors.Is(err, blockstore.ErrCorrupt) && info.Sealed {
				s.foundCorrupt(id, err)
			}
			return sendReadError(stream, off, err)
		}
	}
	return nil
}

// foundCorrupt marks a sealed replica that failed a read's checksum
// corrupt and reports it to the nameserver (once: a replica marked
// already fails every read, and the scrubber reports it again).
func (s *Server) foundCorrupt(id blockstore.BlockID, err error) {
	if s.vols.Corrupt(id) || s.vols.MarkCorrupt(id) != nil {
		return
	}
	glog.Errorf("read: %v", err)
	if s.bad != nil {
		s.bad.add(id, err.Error())
	}
}

func sendReadError(stream grpc.ServerStreamingServer[bfspb.ReadChunk], off int64, err error) error {
	code, msg := statusTable.Of(err)
	return stream.Send(&bfspb.ReadChunk{Status: code, Offset: off, Message: msg})
}

// Seal stops all writing to a block (also one never seen), syncs it and
// queues its BlockReceived report.
func (s *Server) Seal(ctx context.Context, req *bfspb.SealRequest) (*bfspb.SealResponse, error) {
	if err := s.checkLeader(ctx, "seal", "", req.Term); err != nil {
		code, msg := statusTable.Of(err)
		return &bfspb.SealResponse{Status: code, Message: msg}, nil
	}
	if fail := s.cfg.TestingKnobs.Seal; fail != nil {
		if err := fail(req.BlockId); err != nil {
			code, msg := statusTable.Of(err)
			return &bfspb.SealResponse{Status: code, Message: msg}, nil
		}
	}
	size, version, err := s.vols.Seal(blockstore.BlockID(req.BlockId))
	code, msg := statusTable.Of(err)
	if err == nil {
		s.metrics.seals.Inc()
		s.sealed(blockstore.BlockID(req.BlockId))
	}
	return &bfspb.SealResponse{Status: code, Message: msg, Size: size, Version: version}, nil
}

// CreateBlock makes an empty replica of a block the nameserver has just
// allocated (AddBlock); a packet never creates one. Idempotent: a block
// with any record here (created, written, sealed) is left as it is.
func (s *Server) CreateBlock(ctx context.Context, req *bfspb.CreateBlockRequest) (*bfspb.CreateBlockResponse, error) {
	if err := s.fromNameServer(ctx, "create block"); err != nil {
		code, msg := statusTable.Of(err)
		return &bfspb.CreateBlockResponse{Status: code, Message: msg}, nil
	}
	if hook := s.cfg.TestingKnobs.CreateBlock; hook != nil {
		if err := hook(req.BlockId); err != nil {
			code, msg := statusTable.Of(err)
			return &bfspb.CreateBlockResponse{Status: code, Message: msg}, nil
		}
	}
	code, msg := statusTable.Of(s.vols.Create(ctx, blockstore.BlockID(req.BlockId)))
	return &bfspb.CreateBlockResponse{Status: code, Message: msg}, nil
}

// Truncate cuts a replica to the length the nameserver agreed.
func (s *Server) Truncate(ctx context.Context, req *bfspb.TruncateRequest) (*bfspb.TruncateResponse, error) {
	if err := s.checkLeader(ctx, "truncate", req.ClusterId, req.Term); err != nil {
		code, msg := statusTable.Of(err)
		return &bfspb.TruncateResponse{Status: code, Message: msg}, nil
	}
	code, msg := statusTable.Of(s.vols.Truncate(blockstore.BlockID(req.BlockId), req.Size))
	return &bfspb.TruncateResponse{Status: code, Message: msg}, nil
}

// DeleteBlocks removes replicas; ones already gone are not an error.
func (s *Server) DeleteBlocks(ctx context.Context, req *bfspb.DeleteBlocksRequest) (*bfspb.DeleteBlocksResponse, error) {
	if err := s.checkLeader(ctx, "delete blocks", req.ClusterId, req.Term); err != nil {
		code, msg := statusTable.Of(err)
		return &bfspb.DeleteBlocksResponse{Status: code, Message: msg}, nil
	}
	var errs []error
	for _, id := range req.BlockIds {
		if err := s.vols.Delete(blockstore.BlockID(id)); err != nil && !errors.Is(err, blockstore.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	code, msg := statusTable.Of(errors.Join(errs...))
	return &bfspb.DeleteBlocksResponse{Status: code, Message: msg}, nil
}

// GetBlockInfo describes a replica.
func (s *Server) GetBlockInfo(_ context.Context, req *bfspb.GetBlockInfoRequest) (*bfspb.GetBlockInfoResponse, error) {
	info, err := s.vols.Info(blockstore.BlockID(req.BlockId))
	code, msg := statusTable.Of(err)
	return &bfspb.GetBlockInfoResponse{Status: code, Message: msg, Size: info.Size, Version: info.Version, Sealed: info.Sealed}, nil
}

// checkLeader refuses a destructive request that comes from another
// certificate than a nameserver's (fromNameServer), names another cluster
// than the chunkserver's, or comes from a nameserver leader of an older
// term than the newest the chunkserver has heard of (a deposed leader).
// A request naming no cluster is not checked for it: the nameserver
// always names its own.
func (s *Server) checkLeader(ctx context.Context, op string, id string, term uint64) error {
	if err := s.fromNameServer(ctx, op); err != nil {
		return err
	}
	err := s.cluster.Term(term)
	if err == nil && id != "" {
		err = s.cluster.Check(id)
	}
	if err != nil {
		glog.Errorf("%s refused: %v", op, err)
	} else {
		glog.V(1).Infof("%s accepted from the nameserver leader of term %d", op, term)
	}
	return err
}
