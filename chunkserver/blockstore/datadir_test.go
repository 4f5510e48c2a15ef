package blockstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirectoryHeldByAnother: a second store on a directory in use is
// refused with an error that names the directory and says it is held;
// once the first is closed the directory opens again.
func TestDirectoryHeldByAnother(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(dir)
	require.NoError(t, err)

	second, err := Open(dir)
	if second != nil {
		second.Close()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "data directory "+dir+" is in use")
	require.Contains(t, err.Error(), "another process holds it")

	require.NoError(t, first.Close())
	again, err := Open(dir)
	require.NoError(t, err, "closing the first store releases the directory")
	require.NoError(t, again.Close())
}
