package lockcmd_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/sdk"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

// TestUnlockWaitShowsCleaning: a tablet server holds /tablet with a file
// open; one replica's chunkserver is down, so the forced unlock's cleaning
// cannot finish. unlock --wait shows the pending file and replica, and
// gives up at its timeout (exit 4); status and list show the cleaning;
// when the chunkserver comes back a second unlock --wait returns once
// UNLOCKED, and history counts the sealed file.
func TestUnlockWaitShowsCleaning(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3),
		// A down chunkserver stays a pending replica for the whole test.
		testcluster.WithNameServerConfig(func(c *nameserver.Config) { c.DeadTimeout = time.Minute }))
	ns := cl
	ctx := context.Background()
	tablet := dial(t, ns, sdk.WithHolder("tablet-a"))
	require.NoError(t, tablet.MkdirAll(ctx, "/tablet", 0))
	held, err := tablet.LockDir(ctx, "/tablet")
	require.NoError(t, err)
	w, err := tablet.Create(ctx, "/tablet/log")
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 1000))
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	loc, err := tablet.Locate(ctx, "/tablet/log")
	require.NoError(t, err)
	require.NotEmpty(t, loc.Blocks)
	down := loc.Blocks[len(loc.Blocks)-1].Replicas[0]
	victim := slices.Index(cl.ChunkserverAddrs(), down)
	require.GreaterOrEqual(t, victim, 0)
	cl.StopChunkserver(victim)

	r := lockctl(t, ns, "unlock", "--force", "--wait", "--timeout", "1s", "/tablet")
	require.Equal(t, lockcmd.ExitCleaning, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "cleaning /tablet (epoch ")
	assert.Regexp(t, `(?m)^  /tablet/log  block \d+  waiting for .*`+down, r.stderr)
	assert.Contains(t, r.stderr, "lockctl: timed out after 1s waiting for the cleaning of /tablet: cleaning (epoch ")
	t.Logf("unlock --wait --timeout printed:\n%s", r.stderr)
	select {
	case <-held.Done():
	case <-time.After(waitFor):
		t.Fatal("the tablet server's lock handle never reported the loss")
	}

	r = lockctl(t, ns, "status", "/tablet")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^State: +cleaning$`, r.stdout)
	assert.Regexp(t, `(?m)^Pending: +1 file\(s\)$`, r.stdout)
	assert.Regexp(t, `(?m)^  /tablet/log  block \d+  waiting for .*`+down, r.stdout)
	r = lockctl(t, ns, "-o", "json", "status", "/tablet")
	st := decode[lockJSON](t, r.stdout)
	require.Len(t, st.Pending, 1)
	assert.Equal(t, "/tablet/log", st.Pending[0].Path)
	assert.Contains(t, st.Pending[0].Replicas, down)
	r = lockctl(t, ns, "list", "--state", "cleaning")
	assert.Regexp(t, `(?m)^/tablet +cleaning +tablet-a +\d+ +\S+ +.* 1 file\(s\)$`, r.stdout)
	r = lockctl(t, ns, "list", "--state", "locked")
	assert.Equal(t, "no locked directory locks at or under /\n", r.stdout)

	// Locking a cleaning directory is refused with exit 4.
	r = lockctl(t, ns, "lock", "/tablet")
	assert.Equal(t, lockcmd.ExitCleaning, r.code)
	assert.Contains(t, r.stderr, "/tablet being cleaned")

	// A non-forced unlock --wait of a cleaning directory waits too.
	waiter := start(t, ns, "unlock", "--wait", "/tablet")
	waiter.stderr.next(t, "/tablet/log")
	cl.RestartChunkserver(victim)
	require.Equal(t, 0, waiter.wait(t), waiter.stderr.text())
	assert.Regexp(t, `^unlocked /tablet \(epoch \d+\)$`, waiter.stdout.text())

	t.Logf("unlock --wait printed:\n%s", waiter.stderr.text())
	r = lockctl(t, ns, "history", "/tablet")
	assert.Regexp(t, `(?m)^tablet-a +\d+ +.* force +1 +\d+$`, r.stdout)
}
