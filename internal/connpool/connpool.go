// Package connpool keeps one gRPC client connection per address, made on
// first use and closed together: the nameserver's and the SDK's
// connections to chunkservers.
package connpool

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
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

// reconnect is how a pooled connection retries a peer it lost: gRPC's
// default waits up to two minutes between attempts, so a chunkserver back
// after an outage would stay unreachable that long. Reset cuts the wait
// short when the peer is known to be back.
var reconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
})

// New returns a pool that dials with opts (after its own reconnect
// policy, which opts may override).
func New(opts ...grpc.DialOption) *Pool {
	p := &Pool{opts: append([]grpc.DialOption{reconnect}, opts...)}
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

// Reset tells the connection to addr, if there is one, that its peer is
// back: a connection waiting to retry it tries at once.
func (p *Pool) Reset(addr string) {
	p.mu.Lock()
	c := p.mu.conns[addr]
	p.mu.Unlock()
	if c != nil {
		c.ResetConnectBackoff()
	}
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
