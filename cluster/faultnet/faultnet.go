// Package faultnet puts a TCP proxy in front of each nameserver's Raft
// port, so that a test can cut, black-hole or delay the link between two
// members of a group while their clients still reach them: the members
// advertise the proxies' addresses, and every connection a member dials
// to a peer passes through the peer's proxy.
//
// A proxy learns who dials from the hello line every Raft connection
// starts with (replica.Hello), so the faults are per link, in both
// directions: Cut(a, b) stops what a sends to b and what b sends to a.
//
//   - Cut closes the link's connections and refuses new ones (a reset).
//   - Blackhole holds them open and passes nothing until healed (packets
//     lost, connections hanging); what was held is delivered on Heal, late.
//   - Delay passes each chunk after a pause.
//
// A Net is safe for concurrent use; Close stops every proxy and waits for
// its goroutines.
package faultnet

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/bfs-go/bfs/nameserver/replica"
)

// Fault is what a link suffers.
type Fault struct {
	// Cut resets the link's connections and refuses new ones.
	Cut bool
	// Blackhole passes nothing until the fault is lifted.
	Blackhole bool
	// Delay is a pause before each chunk passes.
	Delay time.Duration
}

// Net is the proxies of one group and the faults of its links.
type Net struct {
	mu struct {
		sync.Mutex
		faults  map[link]Fault
		proxies map[string]*proxy
		// changed is closed (and replaced) when a fault changes.
		changed chan struct{}
		closed  bool
	}
	wg sync.WaitGroup
}

type link struct{ a, b string }

func linkOf(a, b string) link {
	if a > b {
		a, b = b, a
	}
	return link{a, b}
}

// New returns a Net without proxies or faults.
func New() *Net {
	n := &Net{}
	n.mu.faults = map[link]Fault{}
	n.mu.proxies = map[string]*proxy{}
	n.mu.changed = make(chan struct{})
	return n
}

// Front starts (or returns) the proxy of member name, forwarding to its
// Raft listener at target, and returns the address its peers must dial
// (the member's advertised Raft address).
func (n *Net) Front(name, target string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return "", errors.New("faultnet: closed")
	}
	if p := n.mu.proxies[name]; p != nil {
		return p.lis.Addr().String(), nil
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p := &proxy{net: n, name: name, target: target, lis: lis, conns: map[*pipe]struct{}{}}
	n.mu.proxies[name] = p
	n.wg.Add(1)
	go p.serve()
	return lis.Addr().String(), nil
}

// Set puts fault f on the link between a and b (both directions).
func (n *Net) Set(a, b string, f Fault) {
	n.mu.Lock()
	if f == (Fault{}) {
		delete(n.mu.faults, linkOf(a, b))
	} else {
		n.mu.faults[linkOf(a, b)] = f
	}
	close(n.mu.changed)
	n.mu.changed = make(chan struct{})
	proxies := make([]*proxy, 0, len(n.mu.proxies))
	for _, p := range n.mu.proxies {
		proxies = append(proxies, p)
	}
	n.mu.Unlock()
	if f.Cut {
		for _, p := range proxies {
			p.cut(linkOf(a, b))
		}
	}
}

// Cut cuts the link between a and b.
func (n *Net) Cut(a, b string) { n.Set(a, b, Fault{Cut: true}) }

// Blackhole black-holes the link between a and b.
func (n *Net) Blackhole(a, b string) { n.Set(a, b, Fault{Blackhole: true}) }

// Delay delays the link between a and b.
func (n *Net) Delay(a, b string, d time.Duration) { n.Set(a, b, Fault{Delay: d}) }

// Heal lifts the fault of the link between a and b.
func (n *Net) Heal(a, b string) { n.Set(a, b, Fault{}) }

// Isolate applies f to every link of a to the other members.
func (n *Net) Isolate(a string, f Fault) {
	for _, b := range n.members() {
		if b != a {
			n.Set(a, b, f)
		}
	}
}

// HealAll lifts every fault.
func (n *Net) HealAll() {
	n.mu.Lock()
	var links []link
	for l := range n.mu.faults {
		links = append(links, l)
	}
	n.mu.Unlock()
	for _, l := range links {
		n.Heal(l.a, l.b)
	}
}

func (n *Net) members() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name := range n.mu.proxies {
		out = append(out, name)
	}
	return out
}

// fault returns the link's fault and a channel closed when any fault
// changes.
func (n *Net) fault(l link) (Fault, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.faults[l], n.mu.changed
}

// Close stops every proxy and its connections.
func (n *Net) Close() {
	n.mu.Lock()
	n.mu.closed = true
	proxies := n.mu.proxies
	n.mu.proxies = map[string]*proxy{}
	close(n.mu.changed)
	n.mu.changed = make(chan struct{})
	n.mu.Unlock()
	for _, p := range proxies {
		p.close()
	}
	n.wg.Wait()
}

// proxy forwards the connections to one member.
type proxy struct {
	net    *Net
	name   string
	target string
	lis    net.Listener
	mu     sync.Mutex
	conns  map[*pipe]struct{}
}

// pipe is one proxied connection: from a dialing member to this one.
type pipe struct {
	link     link
	in, out  net.Conn
	stopOnce sync.Once
}

func (p *pipe) stop() {
	p.stopOnce.Do(func() {
		p.in.Close()
		p.out.Close()
	})
}

func (p *proxy) serve() {
	defer p.net.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.net.wg.Add(1)
		go p.handle(in)
	}
}

// handle reads the dialer's hello, refuses the connection if its link is
// cut, and forwards both ways.
func (p *proxy) handle(in net.Conn) {
	defer p.net.wg.Done()
	in.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := readLine(in)
	in.SetReadDeadline(time.Time{})
	if err != nil {
		in.Close()
		return
	}
	hello, err := replica.ParseHello(strings.TrimSuffix(line, "\n"))
	if err != nil {
		in.Close()
		return
	}
	l := linkOf(hello.Name, p.name)
	if f, _ := p.net.fault(l); f.Cut {
		in.Close()
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	if _, err := io.WriteString(out, line); err != nil {
		in.Close()
		out.Close()
		return
	}
	pp := &pipe{link: l, in: in, out: out}
	p.mu.Lock()
	p.conns[pp] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(pp, out, in) })
	wg.Go(func() { p.copy(pp, in, out) })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, pp)
	p.mu.Unlock()
}

// copy forwards src to dst chunk by chunk, under the link's fault.
func (p *proxy) copy(pp *pipe, dst, src net.Conn) {
	defer pp.stop()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.pass(pp.link) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits while the link is black-holed, sleeps its delay, and
// reports whether the chunk may pass (not cut, the Net not closed).
func (p *proxy) pass(l link) bool {
	for {
		f, changed := p.net.fault(l)
		switch {
		case f.Cut:
			return false
		case f.Blackhole:
			<-changed
			if p.closed() {
				return false
			}
			continue
		case f.Delay > 0:
			time.Sleep(f.Delay)
		}
		return !p.closed()
	}
}

func (p *proxy) closed() bool {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	return p.net.mu.closed
}

// cut resets the proxied connections of link l.
func (p *proxy) cut(l link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pp := range p.conns {
		if pp.link == l {
			pp.stop()
		}
	}
}

func (p *proxy) close() {
	p.lis.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for pp := range p.conns {
		pp.stop()
	}
}

func readLine(c net.Conn) (string, error) {
	var b [1]byte
	var sb strings.Builder
	for sb.Len() < 512 {
		if _, err := c.Read(b[:]); err != nil {
			return "", err
		}
		sb.WriteByte(b[0])
		if b[0] == '\n' {
			return sb.String(), nil
		}
	}
	return "", errors.New("faultnet: hello line too long")
}
