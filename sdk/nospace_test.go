package sdk_test

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/sdk"
)

// TestNoSpaceIsResourceExhausted: when every chunkserver of a write set
// is out of disk space (ENOSPC creating the replica), the writer's error
// is ErrResourceExhausted, not a bare ErrUnavailable or an internal
// error.
func TestNoSpaceIsResourceExhausted(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(2), testcluster.WithChunkserverConfig(func(_ int, cfg *chunkserver.Config) {
		cfg.TestingKnobs.CreateBlock = func(int64) error {
			return &os.PathError{Op: "open", Path: "blk", Err: syscall.ENOSPC}
		}
	}))
	c := dial(t, cl.NameServerAddr, cl.AsClient())
	ctx := context.Background()
	w, err := c.Create(ctx, "/full", sdk.Replication(2))
	require.NoError(t, err)
	_, err = w.Write([]byte("no room"))
	require.NoError(t, err)
	err = w.CloseContext(ctx)
	require.ErrorIs(t, err, sdk.ErrResourceExhausted)
}
