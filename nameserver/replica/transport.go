package replica

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer carries Raft's messages: connections accepted on the
// node's own listener and dialed with the node's dialer (plain TCP, or
// what Config.Dial makes: TLS, a test's proxy).
type streamLayer struct {
	lis  net.Listener
	addr string
	dial func(ctx context.Context, addr string) (net.Conn, error)
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (s *streamLayer) Accept() (net.Conn, error) { return s.lis.Accept() }
func (s *streamLayer) Close() error              { return s.lis.Close() }

// Addr is the advertised address: what peers are told to dial.
func (s *streamLayer) Addr() net.Addr { return advertised(s.addr) }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if s.dial != nil {
		return s.dial(ctx, string(address))
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", string(address))
}

// advertised is an address as given, which need not resolve here (a node
// behind a proxy or NAT advertises what its peers dial).
type advertised string

func (a advertised) Network() string { return "tcp" }
func (a advertised) String() string  { return string(a) }
