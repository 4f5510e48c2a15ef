package benchcmd

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Some measurements need RPCs the SDK does not expose (the chunkserver's
// Seal, a session that is never kept alive): rawConns makes them.

// rawConns are plain gRPC connections to the nameserver and to
// chunkservers, made on first use. Safe for concurrent use.
type rawConns struct {
	// creds are the client certificate presented; nil: plaintext.
	creds *certs.Creds
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (r *rawConns) conn(addr string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cc := r.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.TransportCredentials(r.creds)))
	if err != nil {
		return nil, err
	}
	if r.conns == nil {
		r.conns = map[string]*grpc.ClientConn{}
	}
	r.conns[addr] = cc
	return cc, nil
}

func (r *rawConns) nameserver(addr string) (bfspb.NameServerClient, error) {
	cc, err := r.conn(addr)
	if err != nil {
		return nil, err
	}
	return bfspb.NewNameServerClient(cc), nil
}

func (r *rawConns) chunkserver(addr string) (bfspb.ChunkServerClient, error) {
	cc, err := r.conn(addr)
	if err != nil {
		return nil, err
	}
	return bfspb.NewChunkServerClient(cc), nil
}

// waitLeading waits until the nameserver ns leads, its term in office:
// until then it answers NOT_LEADER.
func waitLeading(ctx context.Context, ns bfspb.NameServerClient) error {
	return poll(ctx, 30*time.Second, "the nameserver to lead", func() (bool, error) {
		r, err := ns.Stat(ctx, &bfspb.StatRequest{Path: "/"})
		return err == nil && r.Status != bfspb.StatusCode_NOT_LEADER, nil
	})
}

func (r *rawConns) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, cc := range r.conns {
		errs = append(errs, cc.Close())
	}
	r.conns = nil
	return errors.Join(errs...)
}
