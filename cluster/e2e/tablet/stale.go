package tablet

import (
	"context"
	"fmt"
	"hash/crc32"
	"path"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// rawPacketSize is the payload of a raw_write probe.
const rawPacketSize = 4096

// rawSeq is the sequence number of a raw_write probe: past any packet the
// run's writers sent, so a replica takes it for a new packet, never for a
// retry of one it has (which it would acknowledge without change).
const rawSeq = 1 << 40

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// staleRound tries, once, everything a tablet server does in its tablet:
// append to its files (which sends packets on the writers' streams),
// write packets to every replica on new streams, create a file in every
// directory, make a directory, rename its files, delete every file in the
// tablet (the new holder's too), remove the locality groups, and with
// lock, lock the tablet again (which, granted, would lift the fence of the
// lost lock: a test that wants every attempt refused asks for it only
// while someone else holds the tablet).
func (s *server) staleRound(ctx context.Context, round int, lock bool) {
	for _, f := range s.files {
		s.append(ctx, f, 1+s.rnd.IntN(s.cfg.MaxAppend))
		for _, addr := range f.addrs {
			s.rawWrite(ctx, f, addr)
		}
	}
	dirs := s.dirs()
	for _, d := range dirs {
		s.try(ctx, OpCreate, path.Join(d, fmt.Sprintf("stale-%d", round)), func(ctx context.Context, p string) error {
			w, err := s.c.Create(ctx, p)
			if err == nil {
				err = w.CloseContext(ctx)
			}
			return err
		})
	}
	s.try(ctx, OpMkdir, path.Join(s.cfg.Tablet, fmt.Sprintf("stale-dir-%d", round)), func(ctx context.Context, p string) error {
		return s.c.Mkdir(ctx, p, 0)
	})
	for _, f := range s.files {
		s.try(ctx, OpRename, f.path, func(ctx context.Context, p string) error {
			return s.c.Rename(ctx, p, fmt.Sprintf("%s.stale-%d", p, round))
		})
	}
	for _, p := range s.tabletFiles(ctx, dirs) {
		s.try(ctx, OpDelete, p, s.c.Remove)
	}
	for _, d := range dirs[1:] {
		s.try(ctx, OpRmdir, d, func(ctx context.Context, p string) error { return s.c.RemoveDir(ctx, p, true) })
	}
	if !lock {
		return
	}
	s.try(ctx, OpLock, s.cfg.Tablet, func(ctx context.Context, p string) error {
		_, err := s.c.LockDir(ctx, p)
		return err
	})
}

// dirs returns the tablet directory and its locality groups.
func (s *server) dirs() []string {
	out := []string{s.cfg.Tablet}
	for _, lg := range s.cfg.LGs {
		out = append(out, path.Join(s.cfg.Tablet, lg))
	}
	return out
}

// tabletFiles lists the files in dirs (reads are never refused), with
// the run's own files first.
func (s *server) tabletFiles(ctx context.Context, dirs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range s.files {
		seen[f.path] = true
		out = append(out, f.path)
	}
	for _, d := range dirs {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		entries, err := s.c.List(ctx, d)
		cancel()
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir && !seen[e.Path] {
				seen[e.Path] = true
				out = append(out, e.Path)
			}
		}
	}
	return out
}

// try runs one namespace operation on p and reports it.
func (s *server) try(ctx context.Context, op, p string, fn func(context.Context, string) error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx, p)
	s.emitOp(Event{Op: op, Path: p, OK: err == nil}, start, err)
}

// rawWrite sends one packet for f's block to the replica at addr on a new
// write stream, and reports whether the chunkserver acknowledged it.
func (s *server) rawWrite(ctx context.Context, f *file, addr string) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	start := time.Now()
	data := Pattern(f.path, f.synced, rawPacketSize)
	e := Event{Op: OpRawWrite, Path: f.path, Replica: addr, Offset: f.synced, Len: len(data)}
	ack, err := sendPacket(ctx, s.creds, addr, f.token, &bfspb.WritePacket{
		BlockId: f.block, Offset: f.synced, Seq: rawSeq, Data: data,
		Crc32C: crc32.Checksum(data, castagnoli), Sync: true, Version: f.version,
	})
	if err == nil && ack.Status != bfspb.StatusCode_OK {
		e.Refusal = ack.Status.String()
		err = fmt.Errorf("chunkserver %s refused the packet: %v %s", addr, ack.Status, ack.Message)
	}
	e.OK = err == nil
	s.emitOp(e, start, err)
}

func sendPacket(ctx context.Context, creds *certs.Creds, addr string, token *bfspb.SignedBlockToken, p *bfspb.WritePacket) (*bfspb.WriteAck, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.TransportCredentials(creds)))
	if err != nil {
		return nil, err
	}
	if ctx, err = blocktoken.Attach(ctx, token); err != nil {
		return nil, err
	}
	defer conn.Close()
	stream, err := bfspb.NewChunkServerClient(conn).Write(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(p); err != nil {
		return nil, err
	}
	ack, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	_ = stream.CloseSend()
	return ack, nil
}
