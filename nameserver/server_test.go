package nameserver_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

func TestNamespaceOverGRPC(t *testing.T) {
	c := testcluster.Start(t)
	conn := c.Dial(c.NameServerAddr)
	ns := bfspb.NewNameServerClient(conn)
	ctx := context.Background()

	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "bfs.NameServer"})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)

	mk, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/a//b/", Parents: true})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, mk.Status)
	require.Equal(t, "b", mk.Info.Name)

	cr, err := ns.Create(ctx, &bfspb.CreateRequest{Path: "/a/b/f"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cr.Status)
	require.EqualValues(t, 3, cr.Info.Replication)

	cr, err = ns.Create(ctx, &bfspb.CreateRequest{Path: "/a/b/f"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_EXISTS, cr.Status)

	for _, bad := range []string{"", "relative", "/a/../b", "/a\x00", "/" + strings.Repeat("x", 5000)} {
		st, err := ns.Stat(ctx, &bfspb.StatRequest{Path: bad})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, st.Status, "%q", bad)
		require.NotEmpty(t, st.Message)
		mk, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: bad})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, mk.Status, "%q", bad)
	}

	ls, err := ns.List(ctx, &bfspb.ListRequest{Path: "/a/b"})
	require.NoError(t, err)
	require.Len(t, ls.Entries, 1)

	rn, err := ns.Rename(ctx, &bfspb.RenameRequest{Src: "/a", Dst: "/a/b/x"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, rn.Status)

	dd, err := ns.DeleteDir(ctx, &bfspb.DeleteDirRequest{Path: "/a"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_DIR_NOT_EMPTY, dd.Status)

	du, err := ns.DiskUsage(ctx, &bfspb.DiskUsageRequest{Path: "/"})
	require.NoError(t, err)
	require.EqualValues(t, 1, du.Files)
	require.EqualValues(t, 3, du.Dirs)

	lk, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/a"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_SESSION_EXPIRED, lk.Status, "locking needs a session")
}

func TestSessionsOverGRPC(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()

	for _, ttl := range []int64{0, -5, 1, int64(time.Hour / time.Millisecond)} {
		r, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "h", TtlMs: ttl})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, r.Status, "ttl %d", ttl)
	}
	open, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "10.0.0.1:9000:1", TtlMs: 5000})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, open.Status)
	require.Len(t, open.SessionId, 32)

	ka, err := ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: open.SessionId})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, ka.Status)
	require.EqualValues(t, 5000, ka.TtlMs)

	// A mutation naming an unknown session is refused.
	mk, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/s", SessionId: "nope"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_SESSION_EXPIRED, mk.Status)
	mk, err = ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/s", SessionId: open.SessionId})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, mk.Status)

	// Sessions survive a restart.
	c.RestartNameServer()
	ns = bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	list, err := ns.ListSessions(ctx, &bfspb.ListSessionsRequest{})
	require.NoError(t, err)
	require.Len(t, list.Sessions, 1)
	require.Equal(t, "10.0.0.1:9000:1", list.Sessions[0].Holder)
	require.Greater(t, list.Sessions[0].RemainingMs, int64(4000), "a full TTL after restart")

	cl, err := ns.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: open.SessionId})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cl.Status)
	ka, err = ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: open.SessionId})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_SESSION_EXPIRED, ka.Status)
}

func TestMetricsEndpoint(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	maddr := lis.Addr().String()
	lis.Close()
	c := testcluster.Start(t, testcluster.WithNameServerConfig(func(cfg *nameserver.Config) { cfg.MetricsAddr = maddr }))
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	_, err = ns.Stat(context.Background(), &bfspb.StatRequest{Path: "/"})
	require.NoError(t, err)
	var body string
	hc := c.HTTPClient()
	defer hc.CloseIdleConnections()
	require.Eventually(t, func() bool {
		resp, err := hc.Get(c.URL(maddr, "/metrics"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return true
	}, 5*time.Second, 20*time.Millisecond)
	require.Contains(t, body, `bfs_nameserver_rpcs_total{method="Stat",status="OK"} 1`)
	require.Contains(t, body, "bfs_nameserver_rpc_duration_seconds_bucket")
}
