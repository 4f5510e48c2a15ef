package sdk_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// idleEnded is how many write streams the chunkserver whose HTTP port is
// at addr ended for their idleness.
func idleEnded(t *testing.T, cl *testcluster.Cluster, addr string) int {
	t.Helper()
	name := fmt.Sprintf("bfs_chunkserver_limit_refusals_total{limit=%q} ", limit.WriteIdle)
	for line := range strings.Lines(cl.Metrics(addr)) {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
			return int(n)
		}
	}
	t.Fatalf("no %s in the metrics of %s", name, addr)
	return 0
}

// TestWriterPausesLongerThanIdleTimeout: an application that pauses
// between writes longer than the chunkservers' --write-idle-timeout has
// its streams ended by every replica; its next writes go on, on new
// streams, with every replica kept, and the file holds every byte.
func TestWriterPausesLongerThanIdleTimeout(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithHTTP(),
		testcluster.WithChunkserverConfig(func(_ int, cfg *chunkserver.Config) { cfg.WriteIdleTimeout = 50 * time.Millisecond }))
	c := dial(t, cl.NameServerAddr, cl.AsClient())
	waitChunkservers(t, cl, 3)
	ctx := context.Background()
	data := randomBytes(3<<20, 7)

	w, err := c.Create(ctx, "/paused")
	require.NoError(t, err)
	var written int
	for pause := range 3 {
		chunk := data[written : written+len(data)/4]
		_, err := w.Write(chunk)
		require.NoError(t, err)
		written += len(chunk)
		if pause == 1 {
			require.NoError(t, w.Sync(ctx), "a Sync after a pause")
		}
		// The pause: every replica ends its stream (a packet or two of
		// the chunk are still buffered in the writer).
		for _, addr := range cl.ChunkserverHTTPAddrs() {
			require.Eventually(t, func() bool { return idleEnded(t, cl, addr) == pause+1 }, 10*time.Second, 10*time.Millisecond,
				"the stream to %s did not end idle", addr)
		}
	}
	_, err = w.Write(data[written:])
	require.NoError(t, err)
	require.NoError(t, w.Close())

	require.True(t, bytes.Equal(data, get(t, c, "/paused")), "the file holds what was written")
	info, err := c.Stat(ctx, "/paused")
	require.NoError(t, err)
	require.Equal(t, 3, info.LiveReplicas, "no replica was dropped for a pause")
}

// TestWriterPausesLongerThanItsToken: a writer whose pause outlasts its
// block's write token (good for minutes; a second here) opens its new
// streams with a fresh token from the nameserver, and the file holds
// every byte.
func TestWriterPausesLongerThanItsToken(t *testing.T) {
	const lifetime = time.Second
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithHTTP(),
		testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
			cfg.TestingKnobs.TokenLifetime = func(a bfspb.BlockAccess) time.Duration {
				if a == bfspb.BlockAccess_BLOCK_ACCESS_WRITE {
					return lifetime
				}
				return 0
			}
		}),
		testcluster.WithChunkserverConfig(func(_ int, cfg *chunkserver.Config) { cfg.WriteIdleTimeout = 50 * time.Millisecond }))
	c := dial(t, cl.NameServerAddr, cl.AsClient())
	waitChunkservers(t, cl, 3)
	ctx := context.Background()
	data := randomBytes(1<<20, 8)

	w, err := c.Create(ctx, "/paused")
	require.NoError(t, err)
	_, err = w.Write(data[:len(data)/2])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	for _, addr := range cl.ChunkserverHTTPAddrs() {
		require.Eventually(t, func() bool { return idleEnded(t, cl, addr) >= 1 }, 10*time.Second, 10*time.Millisecond,
			"the stream to %s did not end idle", addr)
	}
	time.Sleep(lifetime + 500*time.Millisecond) // the token has expired
	_, err = w.Write(data[len(data)/2:])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx), "a Sync after the token expired")
	require.NoError(t, w.Close())

	require.True(t, bytes.Equal(data, get(t, c, "/paused")), "the file holds what was written")
	info, err := c.Stat(ctx, "/paused")
	require.NoError(t, err)
	require.Equal(t, 3, info.LiveReplicas, "no replica was dropped for an expired token")
}
