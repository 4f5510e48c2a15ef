package bfscmd_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/internal/testcluster"
	"github.com/bfs-go/bfs/sdk"
)

func TestAdminSafeMode(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	ns := cl.NameServerAddr
	ok := func(args ...string) string {
		t.Helper()
		r := bfs(t, ns, args...)
		require.Equal(t, 0, r.code, "bfs %q: %s", args, r.stderr)
		return r.stdout
	}
	require.Equal(t, "safe mode OFF: 0 of 0 known blocks reported (100.00%, threshold 99.90%)\n", ok("admin", "safemode", "get"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, ns)
	require.NoError(t, err)
	w, err := c.Create(ctx, "/f", sdk.Replication(1))
	require.NoError(t, err)
	_, err = w.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Close())

	cl.StopChunkserver(0)
	cl.RestartNameServer()
	require.Equal(t, "safe mode ON: 0 of 1 known blocks reported (0.00%, threshold 99.90%)\n", ok("admin", "safemode", "get"))
	require.Equal(t, "safe mode OFF (left by an operator): 0 of 1 known blocks reported (0.00%, threshold 99.90%)\n", ok("admin", "safemode", "leave"))
	r := bfs(t, ns, "admin", "safemode", "enter")
	require.Equal(t, 2, r.code, r.stderr)
}
