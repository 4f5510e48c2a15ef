package nameserver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/nameserver"
)

// TestDataDirectoryHeldByAnother: a second nameserver on a data directory
// in use is refused with an error that names the directory and says it
// is held; once the first one is closed the directory opens again.
func TestDataDirectoryHeldByAnother(t *testing.T) {
	cfg := nameserver.DefaultConfig()
	cfg.DataDir, cfg.Insecure = t.TempDir(), true
	first, err := nameserver.New(cfg)
	require.NoError(t, err)

	second, err := nameserver.New(cfg)
	if second != nil {
		second.Close()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "data directory "+cfg.DataDir+" is in use")
	require.Contains(t, err.Error(), "another process holds it")

	require.NoError(t, first.Close())
	again, err := nameserver.New(cfg)
	require.NoError(t, err, "closing the first nameserver releases the directory")
	require.NoError(t, again.Close())
}
