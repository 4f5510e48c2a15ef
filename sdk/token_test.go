package sdk_test

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestReaderRenewsAnExpiredToken: a Reader whose read token has expired
// (a file kept open for long) is refused by the chunkservers, asks the
// nameserver for a new token once and reads on, with Read and ReadAt.
func TestReaderRenewsAnExpiredToken(t *testing.T) {
	var expired atomic.Int64 // read tokens still to issue expired
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.TestingKnobs.TokenLifetime = func(a bfspb.BlockAccess) time.Duration {
			if a == bfspb.BlockAccess_BLOCK_ACCESS_READ && expired.Add(-1) >= 0 {
				return -time.Minute
			}
			return 0
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	data := bytes.Repeat([]byte("renew me "), 10000)
	w, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	expired.Store(1) // the token Open gets
	r, err := c.Open(ctx, "/f")
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.NoError(t, r.Close())

	expired.Store(1)
	r, err = c.Open(ctx, "/f")
	require.NoError(t, err)
	buf := make([]byte, 100)
	_, err = r.ReadAt(buf, 1000)
	require.NoError(t, err)
	require.Equal(t, data[1000:1100], buf)
	require.NoError(t, r.Close())
	require.Negative(t, expired.Load(), "the renewal asked for a token again")
}
