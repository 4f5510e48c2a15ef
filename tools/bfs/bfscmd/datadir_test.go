package bfscmd_test

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/internal/datadir"
	"github.com/bfs-go/bfs/nameserver"
)

// TestDaemonOnDataDirectoryInUse: a daemon started on a data directory
// that another one holds says which directory and that another process
// holds it, rather than only "resource temporarily unavailable".
func TestDaemonOnDataDirectoryInUse(t *testing.T) {
	hold := map[string]func(dir string) (io.Closer, error){
		"nameserver": func(dir string) (io.Closer, error) {
			cfg := nameserver.DefaultConfig()
			cfg.DataDir, cfg.Insecure = dir, true
			return nameserver.New(cfg)
		},
		"chunkserver": func(dir string) (io.Closer, error) { return blockstore.Open(dir) },
	}
	for daemon, open := range hold {
		t.Run(daemon, func(t *testing.T) {
			dir := t.TempDir()
			held, err := open(dir)
			require.NoError(t, err)
			defer held.Close()
			r := run(t, "--nameserver", "127.0.0.1:1", "--insecure", daemon, "--data", dir, "--listen", "127.0.0.1:0", "--metrics", "")
			assert.Equal(t, 1, r.code)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "data directory "+dir+" is in use: another process holds it")
			assert.Contains(t, r.stderr, filepath.Join(dir, datadir.LockFile))
		})
	}
}
