package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/dirlock"
)

// TestUnlockOfMissingPath: an unlock names the state of a directory that
// exists; a path that is not there, or not a directory, is that error,
// never "unlocked".
func TestUnlockOfMissingPath(t *testing.T) {
	s := open(t, t.TempDir())
	openSessions(t, s, "A")
	require.NoError(t, mkdir(s, "/d", false))
	require.NoError(t, createAs(s, "/d/f", "", false))

	_, err := unlockDir(s, "/nope", "", true)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = unlockDir(s, "/d/nope", "A", false)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = unlockDir(s, "/d/f", "", true)
	require.ErrorIs(t, err, ErrNotDirectory)

	res, err := unlockDir(s, "/d", "", true)
	require.ErrorIs(t, err, dirlock.ErrUnlocked, "an existing directory answers its state")
	require.Equal(t, dirlock.Unlocked, res.Lock.Status)
}
