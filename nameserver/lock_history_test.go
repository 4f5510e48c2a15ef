package nameserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestLockHistoryKeepsTheNewest: a directory locked over and over keeps
// the newest MaxHistory locks, across a restart, and answers carry no
// bookkeeping of how they are stored.
func TestLockHistoryKeepsTheNewest(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()
	mkdirAll(t, ns, "/d")
	var epochs []uint64
	cycle := func(n int) {
		session := openSession(t, ns, "h")
		for range n {
			epochs = append(epochs, lockAs(t, ns, "/d", session).Epoch)
			un, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/d", SessionId: session})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status)
		}
	}
	cycle(namespace.MaxHistory - 3)
	c.RestartNameServer()
	ns = bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	cycle(10)

	h, err := ns.GetLockHistory(ctx, &bfspb.GetLockHistoryRequest{Path: "/d"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, h.Status)
	require.Len(t, h.Entries, namespace.MaxHistory)
	for i, e := range h.Entries {
		require.Equal(t, epochs[len(epochs)-namespace.MaxHistory+i], e.Epoch, "entry %d", i)
		require.Zero(t, e.Stored)
		require.Zero(t, e.OldestEpoch)
		require.Equal(t, "holder", e.Reason)
	}
}
