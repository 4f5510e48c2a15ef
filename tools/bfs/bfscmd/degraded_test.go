package bfscmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
)

// TestDegradedPut: with two live chunkservers a file of replication 3 is
// written to both (the default --min-replication is 1), reads back whole,
// and ls -l shows the two live replicas beside the target, never 3.
func TestDegradedPut(t *testing.T) {
	ns := testcluster.Start(t, testcluster.WithChunkservers(2))
	local := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(local, []byte("degraded but whole"), 0o644))

	r := bfs(t, ns, "put", "-r", "3", local, "/f")
	require.Equal(t, 0, r.code, r.stderr)
	r = bfs(t, ns, "ls", "-l", "/f")
	require.Equal(t, 0, r.code, r.stderr)
	fields := strings.Fields(r.stdout)
	require.GreaterOrEqual(t, len(fields), 2, r.stdout)
	assert.Equal(t, "2/3", fields[1], r.stdout)
	r = bfs(t, ns, "stat", "/f")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^Replication: +3 \(2 live\)$`, r.stdout)
	r = bfs(t, ns, "cat", "/f")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "degraded but whole", r.stdout)
}

// TestMinReplicationRefusesPut: below --min-replication live chunkservers
// a new block is refused, as before degraded writes.
func TestMinReplicationRefusesPut(t *testing.T) {
	ns := testcluster.Start(t, testcluster.WithChunkservers(2), testcluster.WithNameServerConfig(func(c *nameserver.Config) {
		c.MinReplication = 3
	}))
	local := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(local, []byte("x"), 0o644))
	r := bfs(t, ns, "put", "-r", "3", local, "/f")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "chunkservers")
}
