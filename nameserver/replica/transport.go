package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/golang/glog"
	"github.com/hashicorp/raft"
)

// streamLayer carries Raft's messages: connections accepted on the
// node's own listener and dialed with the node's dialer (plain TCP, or
// what Config.Dial makes: TLS, a test's proxy).
//
// Every connection starts with a hello line naming the dialing node and
// its cluster id (see Hello); the accepting node refuses one from a
// member of another cluster, so a nameserver started on a wrong data
// directory, or pointed at the wrong peers, never joins a group it does
// not belong to.
type streamLayer struct {
	lis  net.Listener
	addr string
	name string
	// tls, if set, secures each connection after its hello.
	tls TLS
	// cluster returns the local cluster id ("" until formatted).
	cluster func() string
	dial    func(ctx context.Context, addr string) (net.Conn, error)
	accepts chan net.Conn
	// donec is closed by Close; lisDone when the listener fails (its
	// error in lisErr).
	donec   chan struct{}
	lisDone chan struct{}
	lisErr  error
	// accepted are the connections handed to Raft, closed by Close:
	// Raft's transport closes its listener but leaves the goroutines
	// serving accepted connections reading until the peer hangs up.
	mu struct {
		sync.Mutex
		accepted map[net.Conn]struct{}
		closed   bool
	}
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// helloTimeout bounds the wait for a new connection's hello line.
const helloTimeout = 5 * time.Second

// TLS makes the TLS configurations of the Raft links: mutual TLS, each
// side verifying that the other is a member of the group.
type TLS interface {
	// ServerConfig is an accepting side's configuration.
	ServerConfig() *tls.Config
	// ClientConfig is a dialing side's, to the member at host.
	ClientConfig(host string) *tls.Config
}

func newStreamLayer(lis net.Listener, addr, name string, cluster func() string,
	dial func(ctx context.Context, addr string) (net.Conn, error), sec TLS) *streamLayer {
	s := &streamLayer{lis: lis, addr: addr, name: name, cluster: cluster, dial: dial, tls: sec,
		accepts: make(chan net.Conn), donec: make(chan struct{}), lisDone: make(chan struct{})}
	s.mu.accepted = map[net.Conn]struct{}{}
	go s.acceptLoop()
	return s
}

// acceptLoop accepts connections and hands on those whose hello is of
// this cluster, each checked on its own goroutine, until the listener
// closes.
func (s *streamLayer) acceptLoop() {
	for {
		conn, err := s.lis.Accept()
		if err != nil {
			s.lisErr = err
			close(s.lisDone)
			return
		}
		go s.admit(conn)
	}
}

func (s *streamLayer) admit(conn net.Conn) {
	err := s.checkHello(conn)
	if err == nil && s.tls != nil {
		var tc net.Conn
		if tc, err = handshake(tls.Server(conn, s.tls.ServerConfig())); err == nil {
			conn = tc
		}
	}
	if err != nil {
		glog.Warningf("raft: refused a connection from %s: %v", conn.RemoteAddr(), err)
		conn.Close()
		return
	}
	select {
	case s.accepts <- conn:
	case <-s.donec:
		conn.Close()
	case <-s.lisDone:
		conn.Close()
	}
}

// checkHello reads a connection's hello line and refuses one from
// another cluster. It reads byte by byte, so nothing of what follows is
// consumed.
func (s *streamLayer) checkHello(conn net.Conn) error {
	conn.SetReadDeadline(time.Now().Add(helloTimeout))
	defer conn.SetReadDeadline(time.Time{})
	line, err := readLine(conn, 512)
	if err != nil {
		return fmt.Errorf("no hello: %w", err)
	}
	h, err := ParseHello(line)
	if err != nil {
		return err
	}
	if mine := s.cluster(); mine != "" && h.Cluster != "" && h.Cluster != mine {
		return fmt.Errorf("%s belongs to cluster %s, this node (%s) to cluster %s: check its --initial-cluster and --data",
			h.Name, h.Cluster, s.name, mine)
	}
	return nil
}

func readLine(conn net.Conn, max int) (string, error) {
	var b [1]byte
	var sb strings.Builder
	for sb.Len() < max {
		if _, err := conn.Read(b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return sb.String(), nil
		}
		sb.WriteByte(b[0])
	}
	return "", errors.New("hello line too long")
}

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case conn := <-s.accepts:
		return s.track(conn)
	case <-s.donec:
		return nil, net.ErrClosed
	case <-s.lisDone:
		return nil, s.lisErr
	}
}

// track records an accepted connection until it is closed; after Close
// it closes it at once.
func (s *streamLayer) track(conn net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	t := &trackedConn{Conn: conn, s: s}
	s.mu.accepted[t] = struct{}{}
	return t, nil
}

// Close stops accepting and closes the connections accepted.
func (s *streamLayer) Close() error {
	select {
	case <-s.donec:
	default:
		close(s.donec)
	}
	err := s.lis.Close()
	s.mu.Lock()
	s.mu.closed = true
	conns := s.mu.accepted
	s.mu.accepted = map[net.Conn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	return err
}

// trackedConn is an accepted connection that leaves its stream layer's
// set when closed.
type trackedConn struct {
	net.Conn
	s    *streamLayer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.mu.accepted, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// Addr is the advertised address: what peers are told to dial.
func (s *streamLayer) Addr() net.Addr { return advertised(s.addr) }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var conn net.Conn
	var err error
	if s.dial != nil {
		conn, err = s.dial(ctx, string(address))
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", string(address))
	}
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte(Hello{Name: s.name, Cluster: s.cluster()}.String())); err != nil {
		conn.Close()
		return nil, err
	}
	if s.tls == nil {
		return conn, nil
	}
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		conn.Close()
		return nil, err
	}
	tc, err := handshake(tls.Client(conn, s.tls.ClientConfig(host)))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("raft: TLS to %s: %w", address, err)
	}
	return tc, nil
}

// handshake completes a TLS handshake within helloTimeout.
func handshake(c *tls.Conn) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), helloTimeout)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Hello is the line a Raft connection starts with: who dials, of which
// cluster.
type Hello struct {
	Name, Cluster string
}

const helloPrefix = "BFS-RAFT/1 "

// String is the line as sent, newline included. An empty cluster id (a
// node not formatted yet) is sent as "-".
func (h Hello) String() string {
	c := h.Cluster
	if c == "" {
		c = "-"
	}
	return helloPrefix + h.Name + " " + c + "\n"
}

// ParseHello reads a hello line (without its newline).
func ParseHello(line string) (Hello, error) {
	rest, ok := strings.CutPrefix(line, helloPrefix)
	fields := strings.Fields(rest)
	if !ok || len(fields) != 2 {
		return Hello{}, fmt.Errorf("not a BFS Raft hello: %q", line)
	}
	h := Hello{Name: fields[0], Cluster: fields[1]}
	if h.Cluster == "-" {
		h.Cluster = ""
	}
	return h, nil
}

// advertised is an address as given, which need not resolve here (a node
// behind a proxy or NAT advertises what its peers dial).
type advertised string

func (a advertised) Network() string { return "tcp" }
func (a advertised) String() string  { return string(a) }

// pipelinedTransport is Raft's network transport, keeping the append
// pipelines it opens so that a node's Close can close them. A pipeline
// whose responses are no longer consumed (its replication ended when a
// response named a newer term: a leader cut off, then healed) blocks the
// next append on it for good (hashicorp/raft's netPipeline.AppendEntries
// waits on a channel only the pipeline's Close unblocks), and with it
// Raft's Shutdown, which waits for the replication goroutine.
type pipelinedTransport struct {
	*raft.NetworkTransport
	mu struct {
		sync.Mutex
		pipelines map[*trackedPipeline]struct{}
		closed    bool
	}
}

func newPipelinedTransport(cfg *raft.NetworkTransportConfig) *pipelinedTransport {
	t := &pipelinedTransport{NetworkTransport: raft.NewNetworkTransportWithConfig(cfg)}
	t.mu.pipelines = map[*trackedPipeline]struct{}{}
	return t
}

// AppendEntriesPipeline opens a pipeline and keeps it until it is closed.
func (t *pipelinedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		p.Close()
		return nil, raft.ErrTransportShutdown
	}
	tp := &trackedPipeline{AppendPipeline: p, t: t}
	t.mu.pipelines[tp] = struct{}{}
	return tp, nil
}

// closePipelines closes every pipeline open, and every one opened later.
func (t *pipelinedTransport) closePipelines() {
	t.mu.Lock()
	t.mu.closed = true
	ps := t.mu.pipelines
	t.mu.pipelines = map[*trackedPipeline]struct{}{}
	t.mu.Unlock()
	for p := range ps {
		p.AppendPipeline.Close()
	}
}

type trackedPipeline struct {
	raft.AppendPipeline
	t *pipelinedTransport
}

func (p *trackedPipeline) Close() error {
	p.t.mu.Lock()
	delete(p.t.mu.pipelines, p)
	p.t.mu.Unlock()
	return p.AppendPipeline.Close()
}
