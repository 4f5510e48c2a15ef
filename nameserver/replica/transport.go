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

	// conns are the connections accepted or dialed and not closed yet:
	// Close closes them. Raft's transport closes its listener on Close but
	// neither the connections it pooled nor those it serves, so their
	// goroutines would read on until the peer hung up.
	conns struct {
		sync.Mutex
		set    map[net.Conn]struct{}
		closed bool
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
	s.conns.set = make(map[net.Conn]struct{})
	go s.acceptLoop()
	return s
}

// track records raw until it is closed, and reports false (having closed
// it) if the layer is closed already.
func (s *streamLayer) track(raw net.Conn) bool {
	s.conns.Lock()
	defer s.conns.Unlock()
	if s.conns.closed {
		raw.Close()
		return false
	}
	s.conns.set[raw] = struct{}{}
	return true
}

// tracked is a connection handed to Raft: closing it forgets its raw
// connection.
type tracked struct {
	net.Conn
	s   *streamLayer
	raw net.Conn
}

func (c tracked) Close() error {
	c.s.conns.Lock()
	delete(c.s.conns.set, c.raw)
	c.s.conns.Unlock()
	return c.Conn.Close()
}

// closeConns closes every connection still open, and any tracked later.
func (s *streamLayer) closeConns() {
	s.conns.Lock()
	defer s.conns.Unlock()
	s.conns.closed = true
	for c := range s.conns.set {
		c.Close()
	}
	clear(s.conns.set)
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
		if s.track(conn) {
			go s.admit(conn)
		}
	}
}

func (s *streamLayer) admit(raw net.Conn) {
	conn := raw
	err := s.checkHello(conn)
	if err == nil && s.tls != nil {
		var tc net.Conn
		if tc, err = handshake(tls.Server(conn, s.tls.ServerConfig())); err == nil {
			conn = tc
		}
	}
	conn = tracked{conn, s, raw}
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
		return conn, nil
	case <-s.donec:
		return nil, net.ErrClosed
	case <-s.lisDone:
		return nil, s.lisErr
	}
}

func (s *streamLayer) Close() error {
	select {
	case <-s.donec:
	default:
		close(s.donec)
	}
	err := s.lis.Close()
	s.closeConns()
	return err
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
	if !s.track(conn) {
		return nil, net.ErrClosed
	}
	raw := conn
	conn = tracked{conn, s, raw}
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
	tc, err := handshake(tls.Client(raw, s.tls.ClientConfig(host)))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("raft: TLS to %s: %w", address, err)
	}
	return tracked{tc, s, raw}, nil
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
