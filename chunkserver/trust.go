package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// The chunkserver acts only on the nameserver's word (SPEC §10; see the
// package documentation, "Trust").

// errNotNameServer refuses a command from a peer whose certificate is not
// a nameserver's.
var errNotNameServer = errors.New("permission denied")

// keyWait bounds how long a call waits for the key its token names.
const keyWait = 3 * time.Second

// errSourceNotNamed refuses a copy from a source whose certificate is not
// the one the nameserver named.
var errSourceNotNamed = errors.New("copy source refused")

// peerName names the peer of ctx for the log.
func peerName(ctx context.Context) string {
	if id, ok := certs.PeerIdentity(ctx); ok {
		return id.String()
	}
	return "an unauthenticated peer"
}

// fromNameServer refuses op unless the peer of ctx presents a nameserver's
// certificate. An insecure chunkserver knows no identities and checks
// nothing (it logged as much at start).
func (s *Server) fromNameServer(ctx context.Context, op string) error {
	if s.cfg.TLS == nil {
		return nil
	}
	if id, ok := certs.PeerIdentity(ctx); ok && id.IsNameServer() {
		return nil
	}
	err := fmt.Errorf("%w: %s from %s: only a nameserver's certificate may ask it", errNotNameServer, op, peerName(ctx))
	glog.Warningf("%v", err)
	s.metrics.refused.WithLabelValues(op).Inc()
	return err
}

// authorize checks the block token a Write or Read carries: issued by the
// nameserver (a key it handed this chunkserver), for block, for access,
// to the peer, not expired. A chunkserver with TLS always asks for one
// (and, before it has keys, answers UNAVAILABLE); an insecure one asks
// once the nameserver has handed it keys, and a lone one (no nameserver,
// no keys) serves everyone.
func (s *Server) authorize(ctx context.Context, block int64, access bfspb.BlockAccess) error {
	if s.cfg.TLS == nil && !s.keys.Ready() {
		return nil
	}
	want := blocktoken.Want{Block: block, Access: access}
	if s.cfg.TLS != nil {
		id, ok := certs.PeerIdentity(ctx)
		if !ok {
			return fmt.Errorf("%w: no verified peer", blocktoken.ErrNotAllowed)
		}
		want.Holder = id.String()
	}
	t, err := blocktoken.FromIncoming(ctx)
	if err == nil {
		// The nameserver may hand out a token before this chunkserver
		// has the key (the answer to its Register still on its way):
		// give the key a moment to arrive.
		wctx, cancel := context.WithTimeout(ctx, keyWait)
		s.keys.Await(wctx, t.KeyId)
		cancel()
		_, err = s.keys.Check(t, want)
	}
	if err != nil {
		op := "read"
		if access == bfspb.BlockAccess_BLOCK_ACCESS_WRITE {
			op = "write"
		}
		if !errors.Is(err, blocktoken.ErrNoKeys) {
			glog.V(1).Infof("%s of block %d by %s refused: %v", op, block, peerName(ctx), err)
			s.metrics.refused.WithLabelValues(op).Inc()
		}
		return fmt.Errorf("%s of block %d: %w", op, block, err)
	}
	return nil
}

// checkSource refuses a copy's source whose certificate (ai, from the
// connection to it) is not the identity the nameserver named; an insecure
// chunkserver checks nothing.
func (s *Server) checkSource(req *bfspb.ReplicateBlockRequest, ai any) error {
	if s.cfg.TLS == nil {
		return nil
	}
	info, ok := ai.(certs.AuthInfo)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s presented no certificate", errSourceNotNamed, req.Source)
	case !info.Identity.IsChunkserver() || info.Identity.String() != req.SourceIdentity:
		return fmt.Errorf("%w: %s presents the certificate of %s, not of %s as the nameserver named it",
			errSourceNotNamed, req.Source, info.Identity, req.SourceIdentity)
	}
	return nil
}

// VerifyBlock reads a replica whole, checking every chunk's checksum, for
// the nameserver, which asks before it believes another's report that the
// replica is bad. A replica that fails is marked corrupt and reported (as
// the scrubber's finds are) and the answer is CORRUPT.
func (s *Server) VerifyBlock(ctx context.Context, req *bfspb.VerifyBlockRequest) (*bfspb.VerifyBlockResponse, error) {
	info, err := s.verify(ctx, req)
	code, msg := statusTable.Of(err)
	return &bfspb.VerifyBlockResponse{Status: code, Message: msg, Size: info.Size, Sealed: info.Sealed}, nil
}

func (s *Server) verify(ctx context.Context, req *bfspb.VerifyBlockRequest) (blockstore.BlockInfo, error) {
	if err := s.checkLeader(ctx, "verify block", "", req.Term); err != nil {
		return blockstore.BlockInfo{}, err
	}
	id := blockstore.BlockID(req.BlockId)
	info, err := s.vols.Info(id)
	if err != nil {
		return info, err
	}
	buf := make([]byte, readChunkSize)
	for off := int64(0); off < info.Size; off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return info, err
		}
		_, err := s.vols.ReadAt(id, buf[:min(int64(len(buf)), info.Size-off)], off)
		if errors.Is(err, io.EOF) {
			break // truncated meanwhile
		}
		if err != nil {
			if errors.Is(err, blockstore.ErrCorrupt) && info.Sealed {
				s.foundCorrupt(id, err)
			}
			return info, err
		}
	}
	return info, nil
}
