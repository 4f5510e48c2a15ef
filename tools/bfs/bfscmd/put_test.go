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
	ns := testcluster.Start(t)
	local := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.WriteFile(local, []byte("small"), 0o644))

	r := bfs(t, ns, "put", local, "/x")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `^bfs: put /x: close /x\._COPYING_: .*chunkservers.*\n$`, r.stderr)
	assert.NotContains(t, r.stderr, "goroutine")
	assert.Empty(t, r.stdout)
}

// TestPutRefusesAnExistingFile: without -f a put refuses an existing
// file and leaves it as it was; with -f it replaces it whole.
func TestPutRefusesAnExistingFile(t *testing.T) {
	ns := testcluster.Start(t, testcluster.WithChunkservers(1))
	dir := t.TempDir()
	for name, data := range map[string]string{"a": "first", "b": "second, longer"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	first := bfs(t, ns, "put", "-r", "1", filepath.Join(dir, "a"), "/x")
	require.Equal(t, 0, first.code, first.stderr)
	r := bfs(t, ns, "put", "-r", "1", filepath.Join(dir, "b"), "/x")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "put /x: file exists (--force to overwrite)")
	assert.Equal(t, "first", bfs(t, ns, "cat", "/x").stdout)
	require.Equal(t, 0, bfs(t, ns, "put", "-f", "-r", "1", filepath.Join(dir, "b"), "/x").code)
	assert.Equal(t, "second, longer", bfs(t, ns, "cat", "/x").stdout)
	assert.Equal(t, "/x\n", bfs(t, ns, "ls", "/").stdout, "no _COPYING_ file left")
}

// TestFailedPutLeavesNothing: a put that fails leaves no file under its
// name that looks complete.
func TestFailedPutLeavesNothing(t *testing.T) {
	ns := testcluster.Start(t)
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
