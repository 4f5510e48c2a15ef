package nameserver

import (
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// peers holds one client connection per chunkserver address.
type peers struct {
	mu struct {
		sync.Mutex
		conns  map[string]*grpc.ClientConn
		closed bool
	}
}

func newPeers() *peers {
	p := &peers{}
	p.mu.conns = make(map[string]*grpc.ClientConn)
	return p
}

func (p *peers) client(addr string) (bfspb.ChunkServerClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, fmt.Errorf("nameserver: closed")
	}
	conn, ok := p.mu.conns[addr]
	if !ok {
		var err error
		conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("nameserver: chunkserver %s: %w", addr, err)
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
