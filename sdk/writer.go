package sdk

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Packet and window sizes of the write path: up to writeWindow packets of
// packetSize bytes are in flight to each replica.
const (
	packetSize  = 256 << 10
	writeWindow = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// headroom is the space kept in front of a packet's data for the rest of
// its wire format (see encodePacket): seven varint fields and the data's
// tag and length take at most 7*11+1+5 bytes.
const headroom = 96

// newPacketBuf returns an empty packet buffer: headroom, then room for
// packetSize bytes of data.
func newPacketBuf() []byte { return make([]byte, headroom, headroom+packetSize) }

// encodePacket returns the wire format of the WritePacket whose data is
// buf[headroom:], written in place in front of the data: the bytes are
// encoded once, with no copy of the data, and the same message goes to
// every replica. Fields come in the order 1-3, 5-8, then 4 (data), which
// protobuf decoders accept like any order; zero values are left out, as
// proto.Marshal does.
func encodePacket(buf []byte, h packetHeader) *wirePacket {
	data := buf[headroom:]
	var b [headroom]byte
	hdr := b[:0]
	for _, f := range []struct {
		num protowire.Number
		v   uint64
	}{
		{1, uint64(h.block)}, {2, uint64(h.offset)}, {3, uint64(h.seq)}, {5, uint64(h.crc)},
		{6, protowire.EncodeBool(h.sync)}, {7, protowire.EncodeBool(h.last)}, {8, h.version},
	} {
		if f.v != 0 {
			hdr = protowire.AppendVarint(protowire.AppendTag(hdr, f.num, protowire.VarintType), f.v)
		}
	}
	if len(data) > 0 {
		hdr = protowire.AppendVarint(protowire.AppendTag(hdr, 4, protowire.BytesType), uint64(len(data)))
	}
	start := headroom - len(hdr)
	copy(buf[start:], hdr)
	return &wirePacket{seq: h.seq, b: buf[start:]}
}

// packetHeader is every field of a WritePacket but its data.
type packetHeader struct {
	block, offset, seq int64
	crc                uint32
	sync, last         bool
	version            uint64
}

// Writer writes a new file. Bytes go to every replica of the file's block
// at once; Sync makes everything written so far durable on every replica
// still in the write set, and Close seals the replicas and closes the
// file. A Writer is for one goroutine at a time, like an *os.File.
//
// Replication policy: a replica that fails mid-write is dropped from the
// write set (and reported to the nameserver at the next Sync or Close);
// the write goes on while at least one replica remains. A replica that
// answers SEALED means the nameserver fenced this writer (its session
// ended, or its directory lock was taken away): every later call fails
// with ErrSealed.
type Writer struct {
	c       *Client
	path    string
	session string

	block  *bfspb.LocatedBlock // nil until the first packet
	fan    *fanout
	buf    []byte
	offset int64 // bytes sent in packets
	seq    int64
	err    error // sticky
	closed bool
}

// Create creates path and opens it for write under the client's session.
// An existing file is an ErrExists unless Overwrite is given.
func (c *Client) Create(ctx context.Context, path string, opts ...CreateOption) (*Writer, error) {
	_, session, err := c.create(ctx, path, opts, true)
	if err != nil {
		return nil, pathError("create", path, err)
	}
	p, _ := cleanPath(path) // create checked it
	return &Writer{c: c, path: p, session: session, buf: newPacketBuf()}, nil
}

// Write buffers p and sends full packets. It returns an error if the
// write has failed (ErrSealed when fenced).
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.usable(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(context.Background(), false, false); err != nil {
				return n, w.setErr(err)
			}
		}
	}
	return n, nil
}

// Sync returns when every byte written so far is on disk on every replica
// in the write set, and the nameserver knows it: a crash of the writer
// after Sync loses none of these bytes.
func (w *Writer) Sync(ctx context.Context) error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.flush(ctx, true, false); err != nil {
		return w.setErr(err)
	}
	if w.block == nil {
		return nil
	}
	if err := w.fan.acked(ctx, w.seq); err != nil {
		return w.setErr(err)
	}
	err := w.c.mutateAs(ctx, w.session, func() (response, error) {
		return w.c.ns.SyncBlock(ctx, &bfspb.SyncBlockRequest{
			Path: w.path, SessionId: w.session, BlockId: w.block.BlockId, Size: w.offset, Dropped: w.fan.dropped(),
			Fences: w.c.fences.of(false, w.path),
		})
	})
	return w.setErr(pathError("sync", w.path, err))
}

// Close writes what is buffered, seals every replica at the final length
// and waits until the nameserver has closed the file.
func (w *Writer) Close() error {
	return w.CloseContext(context.Background())
}

// CloseContext is Close bounded by ctx.
func (w *Writer) CloseContext(ctx context.Context) error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		if w.fan != nil {
			w.fan.abort()
			w.c.untrack(w.fan)
		}
		return w.err
	}
	var dropped []string
	if w.block != nil || len(w.buf) > headroom {
		if err := w.flush(ctx, true, true); err != nil {
			return w.abort(err)
		}
		if err := w.fan.acked(ctx, w.seq); err != nil {
			return w.abort(err)
		}
		dropped = w.fan.dropped()
		w.fan.finish()
		w.c.untrack(w.fan)
	}
	err := w.c.mutateAs(ctx, w.session, func() (response, error) {
		return w.c.ns.FinishFile(ctx, &bfspb.FinishFileRequest{
			Path: w.path, SessionId: w.session, Size: w.offset, Dropped: dropped, Wait: true,
			Fences: w.c.fences.of(false, w.path),
		})
	})
	w.err = pathError("close", w.path, err)
	return w.err
}

// abort ends a Close that failed. The fan-out is nil when the failure
// was the AddBlock that would have built it.
func (w *Writer) abort(err error) error {
	if w.fan != nil {
		w.fan.abort()
		w.c.untrack(w.fan)
	}
	w.err = pathError("close", w.path, err)
	return w.err
}

func (w *Writer) usable() error {
	if w.closed {
		return pathError("write", w.path, ErrClosed)
	}
	return w.err
}

func (w *Writer) setErr(err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		err = pathError("write", w.path, err)
	}
	if w.err == nil {
		w.err = err
	}
	return err
}

// flush sends the buffered bytes as one packet (also when empty, if sync
// or last asks for it).
func (w *Writer) flush(ctx context.Context, sync, last bool) error {
	data := w.buf[headroom:]
	if len(data) == 0 && !sync && !last {
		return nil
	}
	if w.block == nil {
		if err := w.addBlock(ctx); err != nil {
			return err
		}
	}
	w.seq++
	p := encodePacket(w.buf, packetHeader{
		block:   w.block.BlockId,
		offset:  w.offset,
		seq:     w.seq,
		crc:     crc32.Checksum(data, castagnoli),
		sync:    sync,
		last:    last,
		version: w.block.Version,
	})
	if err := w.fan.put(ctx, p); err != nil {
		return err
	}
	w.offset += int64(len(data))
	w.buf = newPacketBuf() // the packet keeps the old buffer
	return nil
}

// addBlock asks the nameserver for the file's block and opens the streams.
func (w *Writer) addBlock(ctx context.Context) error {
	blk, err := w.askBlock(ctx)
	if err != nil {
		return err
	}
	if blk == nil || len(blk.Replicas) == 0 {
		return fmt.Errorf("%w: add block answer without replicas", ErrInternal)
	}
	addrs := make([]string, len(blk.Replicas))
	for i, r := range blk.Replicas {
		addrs[i] = r.Address
	}
	fan, err := newFanout(w.c, addrs, blk.Token, w.renewToken, writeWindow)
	if err != nil {
		return err
	}
	if err := w.c.track(fan); err != nil {
		fan.abort()
		return err
	}
	w.block, w.fan = blk, fan
	return nil
}

// askBlock asks the nameserver for the file's block: its first AddBlock
// allocates it, a later one answers the same block with a new write token.
func (w *Writer) askBlock(ctx context.Context) (*bfspb.LocatedBlock, error) {
	var resp *bfspb.AddBlockResponse
	err := w.c.mutateAs(ctx, w.session, func() (response, error) {
		var err error
		resp, err = w.c.ns.AddBlock(ctx, &bfspb.AddBlockRequest{Path: w.path, SessionId: w.session, Fences: w.c.fences.of(false, w.path)})
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetBlock(), nil
}

// renewToken is a new write token of the file's block.
func (w *Writer) renewToken(ctx context.Context) (*bfspb.SignedBlockToken, error) {
	blk, err := w.askBlock(ctx)
	if err != nil {
		return nil, err
	}
	return blk.GetToken(), nil
}
