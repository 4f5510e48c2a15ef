package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Reader reads a file. It implements io.Reader, io.ReaderAt, io.Seeker and
// io.Closer. Its length is fixed when it is opened: the closed length of a
// closed file, or for a file still being written the bytes every reachable
// replica has (what the writer has had acknowledged). Reads go to any
// replica holding the block; a replica that fails or returns a damaged
// chunk is skipped for the next; with no replica to read from (the
// nameserver knows none) reads fail with ErrUnavailable. Read is for one
// goroutine at a time; ReadAt may be called concurrently. A replica that
// answered CORRUPT while a read succeeded from another is reported to the
// nameserver (ReportBadReplicas), in the background and best effort.
type Reader struct {
	c         *Client
	path      string
	info      *FileInfo
	block     *bfspb.LocatedBlock // nil for a file without data
	size      int64
	off       int64
	preferred int // replica index Read streams from

	// The streaming Read in progress, if any, and its unread bytes.
	stream bfspb.ChunkServer_ReadClient
	cancel context.CancelFunc
	// streamAddr is the replica the stream reads from.
	streamAddr string
	streamOff  int64
	pending    []byte
	closed     bool

	// tokenMu guards token, the read token the chunkservers ask for (from
	// GetFileLocation; asked for again when a chunkserver refuses it, as
	// it does once it has expired).
	tokenMu sync.Mutex
	token   *bfspb.SignedBlockToken

	// badMu guards bad, the replicas that answered CORRUPT and are not
	// yet reported (address to reason), and reported, those that were.
	badMu    sync.Mutex
	bad      map[string]string
	reported map[string]bool
}

// Open opens path for reading.
func (c *Client) Open(ctx context.Context, path string) (*Reader, error) {
	r, err := c.open(ctx, path)
	return r, pathError("open", path, err)
}

func (c *Client) open(ctx context.Context, path string) (*Reader, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := c.ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: p})
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if err := responseError(resp); err != nil {
		return nil, err
	}
	r := &Reader{c: c, path: p, info: newFileInfo(p, resp.GetInfo()), size: resp.GetInfo().GetSize()}
	if len(resp.Blocks) > 1 {
		return nil, fmt.Errorf("%w: file has %d blocks; this client reads one", ErrInternal, len(resp.Blocks))
	}
	if len(resp.Blocks) == 1 {
		r.block, r.token = resp.Blocks[0], resp.Blocks[0].Token
		if r.block.Open {
			r.size = r.visibleLength(ctx)
		}
	}
	return r, nil
}

// visibleLength asks every replica of an open block how much it holds and
// returns the least: bytes every replica has were acknowledged to the
// writer. Unreachable replicas are left out.
func (r *Reader) visibleLength(ctx context.Context) int64 {
	size := int64(-1)
	for _, rep := range r.block.Replicas {
		cl, err := r.c.chunkserver(rep.Address)
		if err != nil {
			continue
		}
		resp, err := cl.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: r.block.BlockId})
		if err != nil || resp.Status != bfspb.StatusCode_OK {
			continue
		}
		if size < 0 || resp.Size < size {
			size = resp.Size
		}
	}
	return max(size, r.block.Size)
}

// Info returns the file as it was when opened.
func (r *Reader) Info() *FileInfo { return r.info }

// Size returns the number of bytes the Reader can read.
func (r *Reader) Size() int64 { return r.size }

// Read reads from the current offset, streaming from one replica.
func (r *Reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, pathError("read", r.path, ErrClosed)
	}
	if r.off >= r.size {
		return 0, io.EOF
	}
	if err := r.readable(); err != nil {
		return 0, pathError("read", r.path, err)
	}
	for len(r.pending) == 0 {
		if err := r.fill(); err != nil {
			return 0, pathError("read", r.path, err)
		}
	}
	n := copy(p, r.pending[:min(int64(len(r.pending)), r.size-r.off)])
	r.pending = r.pending[n:]
	r.off += int64(n)
	return n, nil
}

// readable says why bytes below the size cannot be read at all: the
// nameserver named no block or no replica to read them from.
func (r *Reader) readable() error {
	switch {
	case r.block == nil:
		return fmt.Errorf("%w: the file has %d bytes but no block", ErrUnavailable, r.size)
	case len(r.block.Replicas) == 0:
		return fmt.Errorf("%w: no replica of block %d is known", ErrUnavailable, r.block.BlockId)
	}
	return nil
}

// readToken returns the token reads carry.
func (r *Reader) readToken() *bfspb.SignedBlockToken {
	r.tokenMu.Lock()
	defer r.tokenMu.Unlock()
	return r.token
}

// renewToken asks the nameserver for a new read token after a chunkserver
// refused the one the Reader had (it expired: a file kept open for long);
// it reports whether it got one for the same block.
func (r *Reader) renewToken() bool {
	ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
	defer cancel()
	resp, err := r.c.ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: r.path})
	if err != nil || resp.Status != bfspb.StatusCode_OK || len(resp.Blocks) != 1 || resp.Blocks[0].BlockId != r.block.BlockId {
		return false
	}
	r.tokenMu.Lock()
	defer r.tokenMu.Unlock()
	r.token = resp.Blocks[0].Token
	return true
}

// renewTimeout bounds the renewal of a read token.
const renewTimeout = 10 * time.Second

// fill receives the next chunk of the stream, opening a stream (on the
// next replica after a failure) when there is none. A refused token is
// renewed once.
func (r *Reader) fill() error {
	var lastErr error
	renewed := false
	for attempt := 0; attempt <= len(r.block.Replicas); attempt++ {
		if r.stream == nil {
			if err := r.openStream(); err != nil {
				lastErr = err
				r.preferred++
				continue
			}
		}
		chunk, err := r.stream.Recv()
		if err == nil && chunk.Status == bfspb.StatusCode_OK && chunk.Offset == r.streamOff && len(chunk.Data) > 0 {
			r.pending = chunk.Data
			r.streamOff += int64(len(chunk.Data))
			r.reportBad()
			return nil
		}
		if err == nil && chunk.Status == bfspb.StatusCode_CORRUPT {
			r.noteBad(r.streamAddr, chunk.Message)
		}
		if err == nil && chunk.Status == bfspb.StatusCode_PERMISSION_DENIED && !renewed && r.renewToken() {
			renewed = true
			r.dropStream()
			attempt--
			continue
		}
		switch {
		case err == io.EOF:
			lastErr = fmt.Errorf("%w: replica ended the stream at %d of %d", ErrUnavailable, r.streamOff, r.size)
		case err != nil:
			lastErr = err
		default:
			lastErr = statusError(chunk.Status, chunk.Message, nil)
			if chunk.Status == bfspb.StatusCode_OK {
				lastErr = fmt.Errorf("%w: unexpected chunk at %d", ErrInternal, chunk.Offset)
			}
		}
		r.dropStream()
		r.preferred++
	}
	return lastErr
}

func (r *Reader) openStream() error {
	rep := r.block.Replicas[r.preferred%len(r.block.Replicas)]
	cl, err := r.c.chunkserver(rep.Address)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	tctx, err := blocktoken.Attach(ctx, r.readToken())
	if err != nil {
		cancel()
		return err
	}
	st, err := cl.Read(tctx, &bfspb.ReadRequest{BlockId: r.block.BlockId, Offset: r.off, Length: r.size - r.off})
	if err != nil {
		cancel()
		return err
	}
	r.stream, r.cancel, r.streamOff, r.pending, r.streamAddr = st, cancel, r.off, nil, rep.Address
	return nil
}

func (r *Reader) dropStream() {
	if r.cancel != nil {
		r.cancel()
	}
	r.stream, r.cancel, r.pending = nil, nil, nil
}

// ReadAt reads len(p) bytes at off, independently of Read's offset.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if r.closed {
		return 0, pathError("read", r.path, ErrClosed)
	}
	if off < 0 {
		return 0, pathError("read", r.path, fmt.Errorf("%w: negative offset", ErrInvalidArgument))
	}
	if off >= r.size {
		return 0, io.EOF
	}
	if err := r.readable(); err != nil {
		return 0, pathError("read", r.path, err)
	}
	want := min(int64(len(p)), r.size-off)
	var lastErr error
	renewed := false
	for i := 0; i < len(r.block.Replicas); i++ {
		addr := r.block.Replicas[(r.preferred+i)%len(r.block.Replicas)].Address
		n, err := r.readAtFrom(addr, p[:want], off)
		if errors.Is(err, ErrPermissionDenied) && !renewed && r.renewToken() {
			renewed = true
			i--
			continue
		}
		if errors.Is(err, ErrCorrupt) {
			r.noteBad(addr, err.Error())
		}
		if err == nil {
			r.reportBad()
			if int64(n) < int64(len(p)) {
				return n, io.EOF
			}
			return n, nil
		}
		lastErr = err
	}
	return 0, pathError("read", r.path, lastErr)
}

func (r *Reader) readAtFrom(addr string, p []byte, off int64) (int, error) {
	cl, err := r.c.chunkserver(addr)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, err = blocktoken.Attach(ctx, r.readToken())
	if err != nil {
		return 0, err
	}
	st, err := cl.Read(ctx, &bfspb.ReadRequest{BlockId: r.block.BlockId, Offset: off, Length: int64(len(p))})
	if err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		chunk, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: replica %s ended the stream early", ErrUnavailable, addr)
			}
			return 0, err
		}
		if chunk.Status != bfspb.StatusCode_OK {
			return 0, statusError(chunk.Status, chunk.Message, nil)
		}
		if chunk.Offset != off+int64(n) {
			return 0, fmt.Errorf("%w: replica %s sent offset %d, want %d", ErrInternal, addr, chunk.Offset, off+int64(n))
		}
		n += copy(p[n:], chunk.Data)
	}
	return n, nil
}

// noteBad records that the replica at addr answered CORRUPT. It is
// reported once a read succeeds from another replica: a reader that reads
// around it knows the others hold the bytes.
func (r *Reader) noteBad(addr, reason string) {
	r.badMu.Lock()
	defer r.badMu.Unlock()
	if r.reported[addr] {
		return
	}
	if r.bad == nil {
		r.bad = make(map[string]string)
	}
	r.bad[addr] = reason
}

// reportBad tells the nameserver of the replicas noted bad, off the
// read's path and best effort: the chunkserver holding a bad replica
// reports it too, and so does its scrubber.
func (r *Reader) reportBad() {
	r.badMu.Lock()
	defer r.badMu.Unlock()
	if len(r.bad) == 0 {
		return
	}
	req := &bfspb.ReportBadReplicasRequest{}
	if r.reported == nil {
		r.reported = make(map[string]bool)
	}
	for addr, reason := range r.bad {
		req.Replicas = append(req.Replicas, &bfspb.BadReplica{BlockId: r.block.BlockId, Address: addr, Reason: reason})
		r.reported[addr] = true
	}
	r.bad = nil
	r.c.background.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, reportTimeout)
		defer cancel()
		_, _ = r.c.ns.ReportBadReplicas(ctx, req)
	})
}

// reportTimeout bounds a report of bad replicas.
const reportTimeout = 10 * time.Second

// Seek sets the offset of the next Read.
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.size + offset
	default:
		return 0, pathError("seek", r.path, fmt.Errorf("%w: whence %d", ErrInvalidArgument, whence))
	}
	if abs < 0 {
		return 0, pathError("seek", r.path, fmt.Errorf("%w: negative position", ErrInvalidArgument))
	}
	if abs != r.off {
		r.dropStream()
		r.off = abs
	}
	return abs, nil
}

// Close releases the Reader.
func (r *Reader) Close() error {
	if !r.closed {
		r.closed = true
		r.dropStream()
	}
	return nil
}

// Location is where a file's blocks are.
type Location struct {
	Size   int64
	Open   bool
	Blocks []BlockLocation
}

// BlockLocation is one block and the chunkservers holding it.
type BlockLocation struct {
	ID       int64
	Size     int64
	Version  uint64
	Replicas []string
}

// Locate returns where the blocks of the file path are.
func (c *Client) Locate(ctx context.Context, path string) (*Location, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, pathError("location", path, err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, pathError("location", path, err)
	}
	resp, err := c.ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: p})
	if err != nil {
		return nil, pathError("location", path, transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return nil, pathError("location", path, err)
	}
	loc := &Location{Size: resp.GetInfo().GetSize(), Open: resp.GetInfo().GetWriterSession() != ""}
	for _, b := range resp.Blocks {
		bl := BlockLocation{ID: b.BlockId, Size: b.Size, Version: b.Version}
		for _, r := range b.Replicas {
			bl.Replicas = append(bl.Replicas, r.Address)
		}
		loc.Blocks = append(loc.Blocks, bl)
	}
	return loc, nil
}
