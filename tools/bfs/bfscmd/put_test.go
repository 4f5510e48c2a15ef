package bfscmd_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/sdk"
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

// TestPutFailsMidCopy: a put whose only chunkserver dies in the middle of
// the copy (its source, a pipe, has given it 4 MiB and has more to come)
// fails, says why, and leaves nothing under its name: no PATH, and its
// PATH._COPYING_ removed.
func TestPutFailsMidCopy(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	fifo := filepath.Join(t.TempDir(), "source")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	put := make(chan result, 1)
	go func() { put <- bfs(t, cl, "put", "-r", "1", fifo, "/x") }()
	src, err := os.OpenFile(fifo, os.O_WRONLY, 0) // once the put opens it
	require.NoError(t, err)
	defer src.Close()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for range 4 {
		_, err := src.Write(chunk)
		require.NoError(t, err)
	}
	// The put has read all but what the pipe holds: it is in the middle of
	// its copy, into /x._COPYING_, open for write.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	fi, err := c.Stat(ctx, "/x._COPYING_")
	require.NoError(t, err)
	require.NotEmpty(t, fi.WriterSession, "the copy is open for write")
	_, err = c.Stat(ctx, "/x")
	require.ErrorIs(t, err, sdk.ErrNotFound)

	cl.StopChunkserver(0)
	// More comes, until the put, failing, stops reading (EPIPE).
	sent := 4
	for ; sent < 1024; sent++ {
		if _, err := src.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.EPIPE)
			break
		}
	}
	var r result
	select {
	case r = <-put:
	case <-ctx.Done():
		t.Fatal("the put still runs with its chunkserver gone")
	}
	t.Logf("put after %d MiB sent: exit %d: %s", sent, r.code, r.stderr)
	require.Equal(t, 1, r.code, r.stderr)
	require.Regexp(t, `^bfs: put /x: `, r.stderr)
	require.NotContains(t, r.stderr, "incomplete copy", "the _COPYING_ file removed")
	require.NotContains(t, r.stderr, "goroutine")
	for _, p := range []string{"/x", "/x._COPYING_"} {
		_, err := c.Stat(ctx, p)
		require.ErrorIs(t, err, sdk.ErrNotFound, p)
	}
	require.Empty(t, bfs(t, cl, "ls", "/").stdout)
}
