package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/golang/glog"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/connpool"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Errors of a copy that the status table maps to their own codes.
var (
	// errCopyBusy refuses a copy beyond Config.MaxCopies, or a second copy
	// of a block already being copied here.
	errCopyBusy = errors.New("copy refused")
	// errSourceGone: the source has no sealed replica of the size asked.
	errSourceGone = errors.New("source replica")
	// errSourceDown: the source could not be reached.
	errSourceDown = errors.New("source unreachable")
	// errExists: the block has a replica here already.
	errExists = errors.New("replica exists")
)

// copier bounds and carries out the copies ReplicateBlock asks for: at
// most max at once. It yields to clients: while the chunkserver's clients
// are busy (see clients), the bytes every copy takes in here, and sends
// from here as a source, are held together to the copy rate; while they
// are idle, copies run at the disk's speed.
type copier struct {
	max int
	// rate is the cap while clients are busy, in bytes per second (0: no
	// cap); limit enforces it, at no limit while they are idle.
	rate    int64
	limit   *rate.Limiter
	clients *clients
	peers   *connpool.Pool
	mu      struct {
		sync.Mutex
		// busy holds the blocks being copied here.
		busy map[blockstore.BlockID]struct{}
	}
}

// newCopier dials the sources with tlsCreds (plaintext with nil).
func newCopier(maxCopies int, bytesPerSec int64, cl *clients, tlsCreds *certs.Creds) *copier {
	c := &copier{max: maxCopies, rate: bytesPerSec, clients: cl,
		// A burst of one read chunk: wait takes at most that much.
		limit: rate.NewLimiter(rate.Inf, readChunkSize),
		// Copies read whole replicas from their sources: the same wide
		// windows and buffers as the data streams the server takes in,
		// so a stream does not stall on window updates.
		peers: connpool.New(grpc.WithTransportCredentials(certs.TransportCredentials(tlsCreds)),
			grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(streamWindow),
			grpc.WithWriteBufferSize(ioBuffer), grpc.WithReadBufferSize(ioBuffer))}
	c.mu.busy = make(map[blockstore.BlockID]struct{})
	return c
}

// wait holds n bytes of a copy (taken in, or sent as a source) to the
// copy rate while clients are busy; while they are idle it does not wait.
func (c *copier) wait(ctx context.Context, n int) error {
	limit := rate.Inf
	if c.rate > 0 && c.clients.busy() {
		limit = rate.Limit(c.rate)
	}
	if c.limit.Limit() != limit {
		c.limit.SetLimit(limit)
	}
	return c.limit.WaitN(ctx, n)
}

// claim reserves a copy slot for block id; release gives it back.
func (c *copier) claim(id blockstore.BlockID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.busy[id]; ok {
		return fmt.Errorf("%w: block %d is being copied here already", errCopyBusy, id)
	}
	if len(c.mu.busy) >= c.max {
		return fmt.Errorf("%w: %d copies in flight, the most this chunkserver makes at once (--max-copies)", errCopyBusy, len(c.mu.busy))
	}
	c.mu.busy[id] = struct{}{}
	return nil
}

func (c *copier) release(id blockstore.BlockID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.busy, id)
}

// inFlight is how many copies are under way.
func (c *copier) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.busy)
}

// ReplicateBlock copies a sealed replica from another chunkserver, each
// chunk's checksum checked on arrival, seals and syncs the copy, and
// reports it to the nameserver (BlockReceived). See the proto for the
// answers. A copy that fails leaves no replica behind.
func (s *Server) ReplicateBlock(ctx context.Context, req *bfspb.ReplicateBlockRequest) (*bfspb.ReplicateBlockResponse, error) {
	n, err := s.replicate(ctx, req)
	code, msg := statusTable.Of(err)
	s.metrics.copies.WithLabelValues(code.String()).Inc()
	if err != nil {
		glog.Warningf("copy of block %d from %s: %v", req.BlockId, req.Source, err)
		return &bfspb.ReplicateBlockResponse{Status: code, Message: msg}, nil
	}
	return &bfspb.ReplicateBlockResponse{Size: n}, nil
}

func (s *Server) replicate(ctx context.Context, req *bfspb.ReplicateBlockRequest) (int64, error) {
	if err := s.checkLeader(ctx, "replicate block", req.ClusterId, req.Term); err != nil {
		return 0, err
	}
	if s.cfg.TLS != nil && req.SourceIdentity == "" {
		return 0, fmt.Errorf("%w: the request names no identity for %s", errSourceNotNamed, req.Source)
	}
	id := blockstore.BlockID(req.BlockId)
	switch {
	case req.BlockId < 0 || req.Size < 0 || req.Source == "":
		return 0, fmt.Errorf("%w: copy of block %d (%d bytes) from %q", blockstore.ErrInvalid, req.BlockId, req.Size, req.Source)
	case s.member != nil && req.Source == s.member.addr:
		return 0, fmt.Errorf("%w: copy of block %d from this chunkserver itself", blockstore.ErrInvalid, req.BlockId)
	}
	if _, err := s.vols.Info(id); err == nil {
		return 0, fmt.Errorf("%w: block %d already has a replica here", errExists, id)
	}
	if err := s.copies.claim(id); err != nil {
		return 0, err
	}
	defer s.copies.release(id)
	if err := s.vols.Create(ctx, id); err != nil {
		return 0, err
	}
	n, err := s.copyFrom(ctx, req)
	if err != nil {
		if derr := s.vols.Delete(id); derr != nil && !errors.Is(derr, blockstore.ErrNotFound) {
			glog.Errorf("copy of block %d failed and its partial replica could not be deleted: %v", id, derr)
		}
		return 0, err
	}
	s.metrics.seals.Inc()
	s.sealed(id)
	return n, nil
}

// copyFrom fills the new, empty replica of the block from the source's
// sealed replica and seals it.
func (s *Server) copyFrom(ctx context.Context, req *bfspb.ReplicateBlockRequest) (int64, error) {
	id := blockstore.BlockID(req.BlockId)
	conn, err := s.copies.peers.Conn(req.Source)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errSourceDown, err)
	}
	src := bfspb.NewChunkServerClient(conn)
	var p peer.Peer
	info, err := src.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: req.BlockId}, grpc.Peer(&p))
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", errSourceDown, req.Source, status.Convert(err).Message())
	}
	// The source is the chunkserver the nameserver named, or nothing is
	// read from it: a copy never takes bytes from whoever answers at an
	// address.
	if err := s.checkSource(req, p.AuthInfo); err != nil {
		return 0, err
	}
	if ctx, err = blocktoken.Attach(ctx, req.SourceToken); err != nil {
		return 0, err
	}
	if info.Status != bfspb.StatusCode_OK || !info.Sealed || info.Size != req.Size {
		return 0, fmt.Errorf("%w: %s has no sealed replica of block %d of %d bytes (%v, sealed %v, %d bytes)",
			errSourceGone, req.Source, id, req.Size, info.Status, info.Sealed, info.Size)
	}
	var off, seq int64
	if req.Size > 0 {
		stream, err := src.Read(ctx, &bfspb.ReadRequest{BlockId: req.BlockId, Length: req.Size, Copy: true})
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %v", errSourceDown, req.Source, err)
		}
		for off < req.Size {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return 0, fmt.Errorf("%w: read from %s: %v", errSourceDown, req.Source, status.Convert(err).Message())
			}
			if err := checkChunk(chunk, req, off); err != nil {
				return 0, err
			}
			if err := s.copies.wait(ctx, len(chunk.Data)); err != nil {
				return 0, err
			}
			seq++
			p := blockstore.Packet{BlockID: id, Offset: off, Seq: seq, Data: chunk.Data, CRC32C: chunk.Crc32C, Version: req.Version}
			if _, err := s.vols.Write(p); errors.Is(err, blockstore.ErrChecksum) {
				return 0, fmt.Errorf("%w: block %d: %d bytes at %d from %s do not match the checksum sent with them",
					blockstore.ErrChecksum, req.BlockId, len(chunk.Data), off, req.Source)
			} else if err != nil {
				return 0, err
			}
			off += int64(len(chunk.Data))
			s.metrics.copied.Add(float64(len(chunk.Data)))
		}
	}
	if off != req.Size {
		return 0, fmt.Errorf("%w: %s sent %d of the %d bytes of block %d", errSourceGone, req.Source, off, req.Size, id)
	}
	size, _, err := s.vols.Seal(id)
	if err == nil && size != req.Size {
		err = fmt.Errorf("blockstore: block %d sealed at %d bytes, want %d", id, size, req.Size)
	}
	return size, err
}

// checkChunk checks a chunk of the source's replica: where it starts. Its
// bytes are checked against the checksum the source sent by the store's
// Write, which computes its own chunk checksums from them in the same
// pass (ErrChecksum). A chunk the source could not verify is CORRUPT
// (the source reports its own replica).
func checkChunk(c *bfspb.ReadChunk, req *bfspb.ReplicateBlockRequest, off int64) error {
	switch {
	case c.Status == bfspb.StatusCode_CORRUPT:
		return fmt.Errorf("%w: %s: block %d at %d: %s", blockstore.ErrCorrupt, req.Source, req.BlockId, c.Offset, c.Message)
	case c.Status != bfspb.StatusCode_OK:
		return fmt.Errorf("%w: %s: block %d: %v %s", errSourceGone, req.Source, req.BlockId, c.Status, c.Message)
	case c.Offset != off || off+int64(len(c.Data)) > req.Size:
		return fmt.Errorf("%w: %s sent %d bytes at %d of block %d, want bytes at %d of %d",
			errSourceGone, req.Source, len(c.Data), c.Offset, req.BlockId, off, req.Size)
	}
	return nil
}
