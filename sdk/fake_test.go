package sdk_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// serveFake serves a scripted nameserver on a loopback port until the
// test ends, and returns its address.
func serveFake(t *testing.T, ns bfspb.NameServerServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	bfspb.RegisterNameServerServer(srv, ns)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return lis.Addr().String()
}

// steadySession is the base of a scripted nameserver that is not about
// sessions: one session, "s1", that never expires, and UNIMPLEMENTED for
// every call the fake does not define.
type steadySession struct {
	bfspb.UnimplementedNameServerServer
}

func (steadySession) OpenSession(context.Context, *bfspb.OpenSessionRequest) (*bfspb.OpenSessionResponse, error) {
	return &bfspb.OpenSessionResponse{SessionId: "s1", TtlMs: 60000}, nil
}

func (steadySession) KeepAlive(context.Context, *bfspb.KeepAliveRequest) (*bfspb.KeepAliveResponse, error) {
	return &bfspb.KeepAliveResponse{TtlMs: 60000}, nil
}

func (steadySession) CloseSession(context.Context, *bfspb.CloseSessionRequest) (*bfspb.CloseSessionResponse, error) {
	return &bfspb.CloseSessionResponse{}, nil
}
