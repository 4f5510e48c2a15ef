package bfscmd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
)

// TestPutSmallFileWithoutChunkservers: a file smaller than one packet asks
// for its block only when it is closed; with no chunkserver alive that
// fails, and put says so in one line and exits 1 (it used to crash with a
// stack trace).
func TestPutSmallFileWithoutChunkservers(t *testing.T) {
	ns := testcluster.Start(t).NameServerAddr
	local := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.WriteFile(local, []byte("small"), 0o644))

	r := bfs(t, ns, "put", local, "/x")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `^bfs: put /x: close /x\._COPYING_: .*chunkservers.*\n$`, r.stderr)
	assert.NotContains(t, r.stderr, "goroutine")
	assert.Empty(t, r.stdout)
}
