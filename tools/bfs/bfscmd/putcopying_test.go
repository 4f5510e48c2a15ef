package bfscmd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
)

// TestFailedPutLeavesNothing: a put that fails leaves no file under its
// name that looks complete.
func TestFailedPutLeavesNothing(t *testing.T) {
	ns := testcluster.Start(t).NameServerAddr
	local := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.WriteFile(local, []byte("small"), 0o644))

	r := bfs(t, ns, "put", local, "/x")
	require.Equal(t, 1, r.code, r.stderr)
	r = bfs(t, ns, "ls", "/")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "/x\n")
	r = bfs(t, ns, "stat", "/x")
	assert.Equal(t, 1, r.code, "stat /x after a failed put: %s", r.stdout)
}
