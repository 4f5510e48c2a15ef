package blockstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLateFirstPacketAfterDelete (I4): a block the nameserver sealed
// before any packet arrived (recorded sealed at 0) and then deleted has
// no record left; a first packet arriving late must not bring it back as
// a fresh replica that no file points to.
func TestLateFirstPacketAfterDelete(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	size, _, err := s.Seal(9)
	require.NoError(t, err)
	require.Zero(t, size)
	require.NoError(t, s.Delete(9))

	late := pkt(9, 1, 0, []byte("late"))
	late.Sync = true
	_, err = s.Write(late)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.Info(9)
	require.ErrorIs(t, err, ErrNotFound)
	require.Empty(t, s.List())

	require.NoError(t, s.Close())
	s = openStore(t, dir)
	require.Empty(t, s.List())
}

// TestCreate: Create makes an empty, unsealed replica that survives a
// crash; on a block the store has any record of it changes nothing.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := context.Background()
	create(t, s, 1, 1) // twice: idempotent
	writeAll(t, s, 2, []byte("hello"), 5, syncLast)
	_, _, err := s.Seal(3) // a Seal before any packet or create
	require.NoError(t, err)
	for _, id := range []BlockID{2, 3} {
		require.NoError(t, s.Create(ctx, id))
	}
	require.ErrorIs(t, s.Create(ctx, -1), ErrInvalid)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.Create(cancelled, 4), context.Canceled)
	want := []BlockInfo{{ID: 1}, {ID: 2, Size: 5}, {ID: 3, Sealed: true}}
	require.Equal(t, want, s.List())
	blocks, _ := s.Usage()
	require.EqualValues(t, 3, blocks)

	// As a kill -9 leaves it: the creations were made durable.
	s2 := openStore(t, crashCopy(t, dir))
	require.Equal(t, want, s2.List())
	_, err = s2.Write(pkt(1, 1, 0, []byte("first")))
	require.NoError(t, err)
	_, err = s2.Write(pkt(3, 1, 0, []byte("late")))
	require.ErrorIs(t, err, ErrSealed, "Create does not unseal")

	// Deleting drops the record: nothing writes the block again.
	require.NoError(t, s.Delete(1))
	_, err = s.Write(pkt(1, 1, 0, []byte("late")))
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, want[1:], s.List())
}
