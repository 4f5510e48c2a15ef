package nameserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
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
