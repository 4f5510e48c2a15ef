package replica

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestHelloRefusesAnotherCluster: a Raft connection whose hello names
// another cluster than the accepting member's is closed and never handed
// to Raft; one of the same cluster, or of a member not formatted yet (a
// new group's first election), is; and Close closes the connections
// handed over.
func TestHelloRefusesAnotherCluster(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	local := newStreamLayer(lis, addr, "ns1", func() string { return "cluster-a" }, nil, nil)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := local.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func(name, cluster string) net.Conn {
		t.Helper()
		peer := newStreamLayer(nopListener{}, "", name, func() string { return cluster }, nil, nil)
		c, err := peer.Dial(raft.ServerAddress(addr), 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}

	stranger := dial("ns9", "cluster-b")
	stranger.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = stranger.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "a member of another cluster's connection is closed")

	for _, tc := range []struct{ name, cluster string }{{"ns2", "cluster-a"}, {"ns3", ""}} {
		c := dial(tc.name, tc.cluster)
		_, err := c.Write([]byte("x"))
		require.NoError(t, err)
		select {
		case got := <-accepted:
			b := make([]byte, 1)
			_, err := io.ReadFull(got, b)
			require.NoError(t, err)
			require.Equal(t, "x", string(b), "what follows the hello of %s is Raft's", tc.name)
		case <-time.After(10 * time.Second):
			t.Fatalf("the connection of %s (cluster %q) was not accepted", tc.name, tc.cluster)
		}
	}
	select {
	case c, ok := <-accepted:
		if ok {
			t.Fatalf("a connection from %s was accepted besides", c.RemoteAddr())
		}
	default:
	}

	kept := dial("ns2", "cluster-a")
	got := <-accepted
	require.NotNil(t, got)
	require.NoError(t, local.Close())
	kept.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = kept.Read(make([]byte, 1))
	require.True(t, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed), "a connection handed to Raft outlived Close: %v", err)
	_, ok := <-accepted
	require.False(t, ok, "Accept after Close")
}

// nopListener is the listener of a stream layer that only dials.
type nopListener struct{}

func (nopListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (nopListener) Close() error              { return nil }
func (nopListener) Addr() net.Addr            { return advertised("") }
