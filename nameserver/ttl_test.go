package nameserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestOpenSessionRefusesTTLBeyondADuration: a ttl_ms whose nanoseconds do
// not fit in an int64 is refused. Converted as it came, 18446744075710 ms
// wrapped to about 2 s and was granted; so did a negative value that
// wrapped to half a second.
func TestOpenSessionRefusesTTLBeyondADuration(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()
	for _, ms := range []int64{18446744075710, -18446744073209, 1 << 62, -1 << 63} {
		resp, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "h", TtlMs: ms})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, resp.Status, "ttl_ms %d granted as %d ms", ms, resp.TtlMs)
		require.Contains(t, resp.Message, "ttl", "ttl_ms %d", ms)
		require.Empty(t, resp.SessionId)
	}
	resp, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "h", TtlMs: 2000})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	require.EqualValues(t, 2000, resp.TtlMs)
}
