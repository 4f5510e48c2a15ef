// Package connpool keeps one gRPC client connection per address, made on
// first use and closed together: the nameserver's and the SDK's
// connections to chunkservers.
package connpool

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
)

// ErrClosed is returned by Conn after Close.
var ErrClosed = errors.New("connection pool closed")

// Pool is a set of connections by address. It is safe for concurrent use.
type Pool struct {
	opts []grpc.DialOption
	mu   struct {
		sync.Mutex
		conns  map[string]*grpc.ClientConn
		closed bool
	}
}

// New returns a pool that dials with opts.
func New(opts ...grpc.DialOption) *Pool {
	p := &Pool{opts: opts}
	p.mu.conns = make(map[string]*grpc.ClientConn)
	return p
}

// Conn returns the connection to addr, making it if needed (grpc.NewClient
// connects lazily, so this never blocks on the network).
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, ErrClosed
	}
	if c, ok := p.mu.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	p.mu.conns[addr] = c
	return c, nil
}

// Close closes every connection; later calls to Conn fail.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.closed = true
	for _, c := range p.mu.conns {
		c.Close()
	}
	p.mu.conns = nil
}
