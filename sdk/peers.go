package sdk

import (
	"fmt"
	"sync"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// peers holds one connection per chunkserver address, made on first use
// with the client's dial options and closed with the client.
type peers struct {
	dialOptions []grpc.DialOption
	mu          struct {
		sync.Mutex
		conns  map[string]*grpc.ClientConn
		closed bool
	}
}

func (p *peers) client(addr string) (bfspb.ChunkServerClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, ErrClosed
	}
	conn, ok := p.mu.conns[addr]
	if !ok {
		var err error
		if conn, err = grpc.NewClient(addr, p.dialOptions...); err != nil {
			return nil, fmt.Errorf("chunkserver %s: %w", addr, err)
		}
		if p.mu.conns == nil {
			p.mu.conns = make(map[string]*grpc.ClientConn)
		}
		p.mu.conns[addr] = conn
	}
	return bfspb.NewChunkServerClient(conn), nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.closed = true
	for _, c := range p.mu.conns {
		c.Close()
	}
	p.mu.conns = nil
}
