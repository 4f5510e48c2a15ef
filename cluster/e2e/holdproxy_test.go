package e2e

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// holdProxy forwards TCP connections to a daemon (a chunkserver that
// advertises the proxy's address). hold freezes the connections open at
// that moment: what they carry, both ways, waits in the proxy, as if in a
// network that stalled, and is delivered, late, on release. Connections
// made after hold pass at once. It models a message sent by a process
// just before it was cut off and delivered after the world moved on.
type holdProxy struct {
	lis    net.Listener
	target atomic.Pointer[string]
	mu     sync.Mutex
	pipes  map[*holdPipe]struct{}
	closed bool
	wg     sync.WaitGroup
	// held counts the bytes dialers sent on held connections.
	held atomic.Int64
}

// holdPipe is one proxied connection; gate is nil while it flows, and
// closed to let it flow again.
type holdPipe struct {
	proxy   *holdProxy
	in, out net.Conn
	mu      sync.Mutex
	gate    chan struct{}
	once    sync.Once
}

func startHoldProxy(t *testing.T) *holdProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{lis: lis, pipes: map[*holdPipe]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *holdProxy) addr() string { return p.lis.Addr().String() }

func (p *holdProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(in)
	}
}

func (p *holdProxy) handle(in net.Conn) {
	defer p.wg.Done()
	out, err := net.Dial("tcp", *p.target.Load())
	if err != nil {
		in.Close()
		return
	}
	pp := &holdPipe{proxy: p, in: in, out: out}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pp.stop()
		return
	}
	p.pipes[pp] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { pp.copy(out, in, true) })
	wg.Go(func() { pp.copy(in, out, false) })
	wg.Wait()
	p.mu.Lock()
	delete(p.pipes, pp)
	p.mu.Unlock()
}

// hold freezes every connection open now and returns how many.
func (p *holdProxy) hold() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pp := range p.pipes {
		pp.mu.Lock()
		if pp.gate == nil {
			pp.gate = make(chan struct{})
		}
		pp.mu.Unlock()
	}
	return len(p.pipes)
}

// release lets every held connection deliver what waited, and flow.
func (p *holdProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pp := range p.pipes {
		pp.open()
	}
}

func (pp *holdPipe) open() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.gate != nil {
		close(pp.gate)
		pp.gate = nil
	}
}

// wait returns once the pipe flows (at once if it is not held), n bytes
// having arrived (from the dialer if inward).
func (pp *holdPipe) wait(n int, inward bool) {
	pp.mu.Lock()
	gate := pp.gate
	pp.mu.Unlock()
	if gate != nil {
		if inward {
			pp.proxy.held.Add(int64(n))
		}
		<-gate
	}
}

// heldBytes is how many bytes dialers sent on held connections.
func (p *holdProxy) heldBytes() int64 { return p.held.Load() }

// copy forwards src to dst; inward is the direction from the dialer to
// the daemon.
func (pp *holdPipe) copy(dst, src net.Conn, inward bool) {
	defer pp.stop()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			pp.wait(n, inward)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (pp *holdPipe) stop() {
	pp.once.Do(func() {
		pp.in.Close()
		pp.out.Close()
	})
}

func (p *holdProxy) close() {
	p.lis.Close()
	p.mu.Lock()
	p.closed = true
	for pp := range p.pipes {
		pp.open()
		pp.stop()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
