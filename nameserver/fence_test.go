package nameserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestFencesGateEveryMutation sends every kind of mutation with a fence
// that is right, of an old epoch, of another session, and unrelated to the
// request: only the right one is accepted; a wrong one is STALE_EPOCH with
// the directory's lock now and the fence's epoch; an unrelated one is
// INVALID_ARGUMENT.
func TestFencesGateEveryMutation(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithChunkservers(1))
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()
	mkdirAll(t, ns, "/t/d")
	mkdirAll(t, ns, "/other")
	a := openSession(t, ns, "tablet-a")
	b := openSession(t, ns, "tablet-b")
	l := lockAs(t, ns, "/t", a)
	cr, err := ns.Create(ctx, &bfspb.CreateRequest{Path: "/t/f", SessionId: a, OpenForWrite: true, Replication: 1})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, cr.Status, cr.Message)

	good := []*bfspb.Fence{{Path: "/t", Epoch: l.Epoch}}
	old := []*bfspb.Fence{{Path: "/t", Epoch: l.Epoch + 7}}
	unrelated := []*bfspb.Fence{{Path: "/other", Epoch: l.Epoch}}
	type answer interface {
		GetStatus() bfspb.StatusCode
		GetMessage() string
		GetConflict() *bfspb.LockConflict
	}
	var block int64
	calls := map[string]func(session string, f []*bfspb.Fence) (answer, error){
		"mkdir": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/t/m", SessionId: s, Fences: f})
		},
		"create": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.Create(ctx, &bfspb.CreateRequest{Path: "/t/c", SessionId: s, Fences: f})
		},
		"chmod": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.Chmod(ctx, &bfspb.ChmodRequest{Path: "/t/d", Mode: 0o700, SessionId: s, Fences: f})
		},
		"rename": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.Rename(ctx, &bfspb.RenameRequest{Src: "/t/d", Dst: "/t/e", SessionId: s, Fences: f})
		},
		"addblock": func(s string, f []*bfspb.Fence) (answer, error) {
			r, err := ns.AddBlock(ctx, &bfspb.AddBlockRequest{Path: "/t/f", SessionId: s, Fences: f})
			if r.GetBlock() != nil {
				block = r.GetBlock().GetBlockId()
			}
			return r, err
		},
		"syncblock": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.SyncBlock(ctx, &bfspb.SyncBlockRequest{Path: "/t/f", SessionId: s, BlockId: block, Fences: f})
		},
		"deletefile": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.DeleteFile(ctx, &bfspb.DeleteFileRequest{Path: "/t/c", SessionId: s, Fences: f})
		},
		"deletedir": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.DeleteDir(ctx, &bfspb.DeleteDirRequest{Path: "/t/e", SessionId: s, Fences: f})
		},
		"finish": func(s string, f []*bfspb.Fence) (answer, error) {
			return ns.FinishFile(ctx, &bfspb.FinishFileRequest{Path: "/t/f", SessionId: s, Fences: f, Wait: true})
		},
	}
	// In dependency order: create before delete, rename before deletedir.
	for _, name := range []string{"mkdir", "create", "chmod", "rename", "addblock", "syncblock", "deletefile", "deletedir", "finish"} {
		call := calls[name]
		r, err := call(a, old)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_STALE_EPOCH, r.GetStatus(), "%s with another epoch: %s", name, r.GetMessage())
		require.Equal(t, "/t", r.GetConflict().GetPath(), name)
		require.Equal(t, l.Epoch, r.GetConflict().GetEpoch(), name)
		require.Equal(t, l.Epoch+7, r.GetConflict().GetFencedEpoch(), name)
		require.Equal(t, bfspb.LockStatus_LOCK_STATUS_LOCKED, r.GetConflict().GetLockStatus(), name)
		require.Equal(t, "tablet-a", r.GetConflict().GetHolder(), name)

		r, err = call(b, good)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_STALE_EPOCH, r.GetStatus(), "%s from another session: %s", name, r.GetMessage())

		r, err = call(a, unrelated)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, r.GetStatus(), "%s with an unrelated fence: %s", name, r.GetMessage())

		r, err = call(a, good)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, r.GetStatus(), "%s with the right fence: %s", name, r.GetMessage())
	}

	// A fence below a recursive delete's target counts too.
	mr, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/t/d2/x", Parents: true, SessionId: a, Fences: good})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, mr.Status, mr.Message)
	r, err := ns.DeleteDir(ctx, &bfspb.DeleteDirRequest{Path: "/t/d2", Recursive: true, SessionId: a,
		Fences: []*bfspb.Fence{{Path: "/t/d2/x", Epoch: 99}}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_STALE_EPOCH, r.GetStatus(), r.GetMessage())
	require.Equal(t, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, r.GetConflict().GetLockStatus())

	// A fence must name a normalized path and an epoch.
	for _, f := range []*bfspb.Fence{{Path: "t", Epoch: l.Epoch}, {Path: "/t", Epoch: 0}} {
		r, err := ns.Create(ctx, &bfspb.CreateRequest{Path: "/t/z", SessionId: a, Fences: []*bfspb.Fence{f}})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, r.GetStatus(), "%v: %s", f, r.GetMessage())
	}
}
