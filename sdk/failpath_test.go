package sdk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestSmallFileCloseWithoutChunkservers writes less than a packet, so the
// block is asked for only at Close; with no chunkserver alive AddBlock
// fails there. Close returns that failure (it used to panic on the
// missing fan-out), says so again when called twice, and the Writer
// refuses further use.
func TestSmallFileCloseWithoutChunkservers(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	w, err := c.Create(ctx, "/small")
	require.NoError(t, err)
	n, err := w.Write([]byte("one small record"))
	require.NoError(t, err)
	require.Equal(t, 16, n)

	err = w.CloseContext(ctx)
	require.ErrorIs(t, err, sdk.ErrUnavailable)
	require.ErrorContains(t, err, "/small")
	require.Equal(t, err, w.Close(), "a second Close reports the first one's failure")
	_, err = w.Write([]byte("more"))
	require.ErrorIs(t, err, sdk.ErrClosed)
	require.ErrorIs(t, w.Sync(ctx), sdk.ErrClosed)
}

// TestSyncWithoutChunkserversThenClose: the first Sync asks for the block;
// its failure sticks, and Close reports it without touching a fan-out
// that was never built.
func TestSyncWithoutChunkserversThenClose(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	w, err := c.Create(ctx, "/synced")
	require.NoError(t, err)
	require.ErrorIs(t, w.Sync(ctx), sdk.ErrUnavailable)
	require.ErrorIs(t, w.Close(), sdk.ErrUnavailable)
}

// TestSmallFileCloseAfterForcedUnlock is the failover of the headline
// with a record smaller than a packet: the tablet server has written it
// but not sent it when the master force-unlocks; its Close then asks for
// the block under a lock it no longer holds and must get an error, not a
// crash of the tablet server.
func TestSmallFileCloseAfterForcedUnlock(t *testing.T) {
	cl, _ := dataCluster(t)
	ctx := context.Background()
	tablet := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("tablet-a"))
	master := dial(t, cl.NameServerAddr, cl.AsAdmin(), sdk.WithHolder("master"))
	require.NoError(t, tablet.Mkdir(ctx, "/t", 0))
	l, err := tablet.LockDir(ctx, "/t")
	require.NoError(t, err)
	w, err := tablet.Create(ctx, "/t/log")
	require.NoError(t, err)
	_, err = w.Write([]byte("a small record"))
	require.NoError(t, err)

	d, err := master.UnlockDir(ctx, "/t", sdk.Force(), sdk.WaitUnlocked(), sdk.AtEpoch(l.Epoch()))
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, d.Status)

	err = w.CloseContext(ctx)
	require.Error(t, err)
	require.True(t, errors.Is(err, sdk.ErrStaleEpoch) || errors.Is(err, sdk.ErrNotOpen) ||
		errors.Is(err, sdk.ErrLocked) || errors.Is(err, sdk.ErrSealed), "%v", err)
	fi, err := master.Stat(ctx, "/t/log")
	require.NoError(t, err)
	require.Zero(t, fi.Size, "the record never reached the file")
	require.Empty(t, fi.WriterSession, "the cleaning closed the file")
}

// locationFake answers GetFileLocation with a file of 10 bytes and the
// given blocks: answers a nameserver should not give (its own fallback is
// the block's write set), which the Reader must refuse rather than crash
// on.
type locationFake struct {
	steadySession
	blocks []*bfspb.LocatedBlock
}

func (f locationFake) GetFileLocation(context.Context, *bfspb.GetFileLocationRequest) (*bfspb.GetFileLocationResponse, error) {
	return &bfspb.GetFileLocationResponse{
		Info:   &bfspb.FileInfo{Type: bfspb.FileType_FILE_TYPE_FILE, Size: 10},
		Blocks: f.blocks,
	}, nil
}

// TestReadWithoutReplicas: Read and ReadAt of a file whose block has no
// replica, or which has bytes but no block, fail with ErrUnavailable.
// (Read used to divide by the number of replicas or dereference the
// missing block; ReadAt to return no bytes and no error.)
func TestReadWithoutReplicas(t *testing.T) {
	for name, blocks := range map[string][]*bfspb.LocatedBlock{
		"block without replicas": {{BlockId: 7, Size: 10}},
		"size without a block":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, serveFake(t, locationFake{blocks: blocks}))
			r, err := c.Open(context.Background(), "/f")
			require.NoError(t, err)
			defer r.Close()
			require.EqualValues(t, 10, r.Size())
			_, err = r.Read(make([]byte, 4))
			require.ErrorIs(t, err, sdk.ErrUnavailable)
			require.ErrorContains(t, err, "/f")
			n, err := r.ReadAt(make([]byte, 4), 0)
			require.Zero(t, n)
			require.ErrorIs(t, err, sdk.ErrUnavailable)
		})
	}
}
