package nameserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/cluster/faultnet"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestFollowerServesHealthAndReflection: a member that does not lead is
// a healthy daemon: it answers gRPC health checks SERVING and serves
// reflection (grpcurl), as the leader does. Only the NameServer service
// is the leader's.
func TestFollowerServesHealthAndReflection(t *testing.T) {
	cl, _, _ := startGroup(t)
	ctx := context.Background()
	for i, addr := range cl.NameServerAddrs() {
		conn := cl.Dial(addr)
		for _, svc := range []string{"", "bfs.NameServer"} {
			h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			require.NoError(t, err, "member %d (leader %d), service %q", i, cl.LeaderIndex(), svc)
			require.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)
		}
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		require.NoError(t, err)
		require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
		resp, err := stream.Recv()
		require.NoError(t, err, "reflection on member %d (leader %d)", i, cl.LeaderIndex())
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.Name)
		}
		require.Contains(t, names, "bfs.NameServer")
		require.NoError(t, stream.CloseSend())
	}
}

// TestWatchEndsWhenLeadershipEnds: a lock watch (WatchDirLocks) is the
// leader's term's: when the leadership ends (a transfer, or the leader
// cut off from its peers) the stream ends with UNAVAILABLE, so the
// watcher opens it again on the new leader; a member that does not lead
// refuses to open one, UNAVAILABLE too.
func TestWatchEndsWhenLeadershipEnds(t *testing.T) {
	cl, fn, c := startGroup(t)
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, "/w", 0))
	watch := func(i int) bfspb.NameServer_WatchDirLocksClient {
		t.Helper()
		wctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		stream, err := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddrs()[i])).WatchDirLocks(wctx, &bfspb.WatchDirLocksRequest{Prefix: "/w"})
		require.NoError(t, err)
		return stream
	}
	requireEnds := func(stream bfspb.NameServer_WatchDirLocksClient, why string) {
		t.Helper()
		for {
			_, err := stream.Recv()
			if err != nil {
				require.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", why, err)
				return
			}
		}
	}

	old := cl.LeaderIndex()
	requireEnds(watch((old+1)%3), "a watch opened on a follower")
	stream := watch(old)
	md, err := stream.Header()
	require.NoError(t, err)
	require.NotNil(t, md, "the leader registered the watch")
	// The watch works: it sees a lock.
	_, err = c.LockDir(ctx, "/w")
	require.NoError(t, err)
	ev, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, "/w", ev.Lock.GetPath())

	admin, err := sdk.Dial(ctx, strings.Join(cl.NameServerAddrs(), ","), cl.AsAdmin())
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.TransferLeader(ctx, ""))
	requireEnds(stream, "the watch on a leader that handed its leadership over")
	next := waitNewLeader(t, cl, old)

	stream = watch(next)
	_, err = stream.Header()
	require.NoError(t, err)
	fn.Isolate(fmt.Sprintf("ns%d", next+1), faultnet.Fault{Blackhole: true})
	t.Cleanup(fn.HealAll)
	requireEnds(stream, "the watch on a leader cut off from its peers")
}
