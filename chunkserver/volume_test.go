package chunkserver

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestLastVolumeFailingStopsServe: with the default
// --failed-volumes-tolerated (-1: serve while one volume is left) a
// chunkserver whose first volume fails serves on with the other, and
// stops when that one fails too: Serve returns an error that says how
// many volumes failed of how many, and why (the daemon exits with it,
// non-zero).
func TestLastVolumeFailingStopsServe(t *testing.T) {
	base := t.TempDir()
	dirs := []string{filepath.Join(base, "a"), filepath.Join(base, "b")}
	var broken sync.Map // data directory → its disk fails every write, sync and check
	cfg := DefaultConfig()
	require.Equal(t, -1, cfg.FailedVolumesTolerated, "the default")
	cfg.DataDir, cfg.DataDirs = "", dirs
	cfg.NameServerAddr, cfg.MetricsAddr, cfg.Insecure = "", "", true
	cfg.TestingKnobs.VolumeFault = func(dir string, op blockstore.Op, _ string) error {
		if _, ok := broken.Load(dir); ok && op != blockstore.OpRead {
			return syscall.EIO
		}
		return nil
	}
	srv, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := bfspb.NewChunkServerClient(conn)
	vols := srv.vols.Volumes()
	waitOut := func(v *volume.Volume) {
		t.Helper()
		select {
		case <-v.Done():
		case err := <-served:
			t.Fatalf("Serve returned with volume %s in service: %v", v.Dir(), err)
		case <-time.After(30 * time.Second):
			t.Fatalf("volume %s still in service", v.Dir())
		}
	}

	broken.Store(dirs[0], true)
	srv.vols.Suspect(vols[0])
	waitOut(vols[0])
	// It serves on, with the volume left.
	writeBlock(t, client, 1, []byte("kept on the last volume"), 8, true)
	got, code := readAll(t, client, 1, 0, 0)
	require.Equal(t, bfspb.StatusCode_OK, code)
	require.Equal(t, "kept on the last volume", string(got))
	require.Equal(t, 1, srv.vols.Volume(1))

	broken.Store(dirs[1], true)
	r, err := client.CreateBlock(context.Background(), &bfspb.CreateBlockRequest{BlockId: 2})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_INTERNAL, r.Status, "a create on a failing disk: %s", r.Message)
	select {
	case err := <-served:
		require.ErrorContains(t, err, "2 of 2 volumes failed, 1 tolerated (--failed-volumes-tolerated)")
		require.ErrorContains(t, err, dirs[1]+": ")
		require.ErrorContains(t, err, "input/output error")
		t.Logf("Serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the chunkserver still serves with every volume failed")
	}
	require.Equal(t, volume.Failed, srv.Volumes()[1].State)
}
