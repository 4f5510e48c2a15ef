package nameserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestHoldersArePrintable: a holder, of a session or of an operator lock,
// is printable text of bounded length, so that no listing of locks can be
// made to lie by a holder that moves the terminal's cursor.
func TestHoldersArePrintable(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, certs.AdminUser)) // takes operator locks
	ctx := context.Background()
	mk, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/tablet9"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, mk.Status, mk.Message)

	for _, holder := range []string{"evil\x1b[2K\r/tablet9 unlocked", "two\nlines", "a\u202eb", strings.Repeat("h", 256)} {
		open, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: holder, TtlMs: 2000})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, open.Status, "session holder %q", holder)
		require.Contains(t, open.Message, "holder")

		lock, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/tablet9", Operator: true, Holder: holder})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, lock.Status, "operator holder %q", holder)
		require.Contains(t, lock.Message, "holder")
	}
	get, err := ns.GetDirLock(ctx, &bfspb.GetDirLockRequest{Path: "/tablet9"})
	require.NoError(t, err)
	require.Equal(t, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, get.GetLock().GetStatus(), "no refused lock was granted")

	lock, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/tablet9", Operator: true, Holder: "ops team ✓"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, lock.Status, lock.Message)
}
