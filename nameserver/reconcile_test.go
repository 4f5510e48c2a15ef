package nameserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestStaleReplicaRejoins: a chunkserver stopped in the middle of a write
// misses the close of the file. When it comes back its replica, shorter
// than the file and never sealed, is sealed and then deleted (repair may
// then copy a whole replica there, the file being a replica short), and
// readers are never sent to the short one.
func TestStaleReplicaRejoins(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()

	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	w, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	_, err = w.Write(data[:len(data)/2])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	block, stale := loc.Blocks[0].ID, loc.Blocks[0].Replicas[0]
	victim := slices.Index(cl.ChunkserverAddrs(), stale)
	require.GreaterOrEqual(t, victim, 0)
	cl.StopChunkserver(victim)
	_, err = w.Write(data[len(data)/2:])
	require.NoError(t, err)
	require.NoError(t, w.Close())

	cl.RestartChunkserver(victim)
	conn, err := grpc.NewClient(stale, cl.DialOption())
	require.NoError(t, err)
	defer conn.Close()
	cs := bfspb.NewChunkServerClient(conn)
	var replaced bool
	require.Eventually(t, func() bool {
		info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: block})
		replaced = err == nil && info.Status == bfspb.StatusCode_OK && info.Sealed && info.Size == int64(len(data))
		return err == nil && info.Status == bfspb.StatusCode_NOT_FOUND || replaced
	}, 30*time.Second, 20*time.Millisecond, "the stale replica on %s was neither deleted nor replaced", stale)

	loc, err = c.Locate(ctx, "/f")
	require.NoError(t, err)
	if !replaced {
		require.NotContains(t, loc.Blocks[0].Replicas, stale)
	}
	r, err := c.Open(ctx, "/f")
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// TestReplicaBackDuringCloseIsReconciled: a chunkserver that comes back
// just as an abandoned file is being closed without it (it was declared
// dead) reports its replica while the close is being decided, when the
// file still counts as open. The close must not forget it: once the
// directory is UNLOCKED that replica is sealed at the agreed length like
// the others (I5), not left writable until its next full block report.
func TestReplicaBackDuringCloseIsReconciled(t *testing.T) {
	ready, proceed := make(chan uint64), make(chan struct{})
	var armed atomic.Bool
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.ReportInterval = time.Hour // only a registration's first report
		cfg.TestingKnobs.BeforeClose = func(entry uint64) {
			if armed.CompareAndSwap(true, false) {
				ready <- entry
				<-proceed
			}
		}
	}))
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(proceed) }) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	holder, master, lock := abandonedWrite(ctx, t, cl)
	loc, err := holder.Locate(ctx, "/d/f")
	require.NoError(t, err)
	block, late := loc.Blocks[0].ID, loc.Blocks[0].Replicas[0]
	victim := slices.Index(cl.ChunkserverAddrs(), late)
	require.GreaterOrEqual(t, victim, 0)
	cl.StopChunkserver(victim)

	armed.Store(true)
	unlocked := make(chan error, 1)
	go func() {
		d, err := master.UnlockDir(ctx, "/d", sdk.Force(), sdk.AtEpoch(lock.Epoch()), sdk.WaitUnlocked())
		if err == nil && d.Status != sdk.Unlocked {
			err = fmt.Errorf("unlock answered %s", d.Status)
		}
		unlocked <- err
	}()
	select {
	case <-ready: // the two live replicas sealed, the victim declared dead
	case err := <-unlocked:
		t.Fatalf("the unlock ended before the close was decided: %v", err)
	case <-ctx.Done():
		t.Fatal("the file was never found ready to close")
	}
	cl.RestartChunkserver(victim)
	require.Eventually(t, func() bool {
		loc, err := master.Locate(ctx, "/d/f")
		return err == nil && slices.Contains(loc.Blocks[0].Replicas, late)
	}, 30*time.Second, 10*time.Millisecond, "the nameserver never heard of the replica on %s again", late)
	release.Do(func() { close(proceed) })
	require.NoError(t, <-unlocked)

	fi, err := master.Stat(ctx, "/d/f")
	require.NoError(t, err)
	require.Empty(t, fi.WriterSession)
	conn, err := grpc.NewClient(late, cl.DialOption())
	require.NoError(t, err)
	defer conn.Close()
	cs := bfspb.NewChunkServerClient(conn)
	require.Eventually(t, func() bool {
		info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: block})
		return err == nil && info.Status == bfspb.StatusCode_OK && info.Sealed && info.Size == fi.Size
	}, 30*time.Second, 10*time.Millisecond, "the replica on %s that came back during the close was left unsealed or at another length", late)
}

// TestCleaningEndsDespiteAFailingSeal: one chunkserver stays alive
// (heartbeating) but fails every Seal, as a chunkserver with a failing
// disk would. Cleaning gives up on its replica after the dead timeout and
// ends with the two replicas that sealed (I7), at the synced length.
func TestCleaningEndsDespiteAFailingSeal(t *testing.T) {
	var failing atomic.Bool
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithChunkserverConfig(func(i int, cfg *chunkserver.Config) {
		if i == 0 {
			cfg.TestingKnobs.Seal = func(int64) error {
				if failing.Load() {
					return errors.New("injected: disk failing")
				}
				return nil
			}
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	_, master, lock := abandonedWrite(ctx, t, cl)

	failing.Store(true)
	d, err := master.UnlockDir(ctx, "/d", sdk.Force(), sdk.AtEpoch(lock.Epoch()), sdk.WaitUnlocked())
	require.NoError(t, err)
	require.Equal(t, sdk.Unlocked, d.Status)
	fi, err := master.Stat(ctx, "/d/f")
	require.NoError(t, err)
	require.Empty(t, fi.WriterSession)
	require.EqualValues(t, 64<<10, fi.Size)
	loc, err := master.Locate(ctx, "/d/f")
	require.NoError(t, err)
	require.NotContains(t, loc.Blocks[0].Replicas, cl.ChunkserverAddrs()[0], "readers are sent to the replica that never sealed")
}

// abandonedWrite has a holder lock /d and write 64 KiB, synced, into
// /d/f, which it leaves open; it returns the holder, a master to unlock
// it, and the lock. Both clients close with the test.
func abandonedWrite(ctx context.Context, t *testing.T, cl *testcluster.Cluster) (holder, master *sdk.Client, lock *sdk.Lock) {
	t.Helper()
	holder, err := sdk.Dial(ctx, cl.NameServerAddr, sdk.WithHolder("holder"), cl.AsClient())
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	master, err = sdk.Dial(ctx, cl.NameServerAddr, sdk.WithHolder("master"), cl.AsAdmin())
	require.NoError(t, err)
	t.Cleanup(func() { master.Close() })
	require.NoError(t, holder.Mkdir(ctx, "/d", 0o755))
	lock, err = holder.LockDir(ctx, "/d")
	require.NoError(t, err)
	w, err := holder.Create(ctx, "/d/f")
	require.NoError(t, err)
	_, err = w.Write(bytes.Repeat([]byte("x"), 64<<10))
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	return holder, master, lock
}
