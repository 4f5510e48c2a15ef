package benchcmd

import (
	"context"
	"testing"
	"time"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

// Every bfs lock+unlock cycle the loop counts is one lock granted (one
// epoch taken) and released.
func TestBFSLockCyclesAreWhatTheLoopCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, err := sandbox.Start(sandbox.Config{Dir: t.TempDir(), Chunkservers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	})
	clients, err := dialN(ctx, sb.NameServerAddr, 1, sb.AsClient())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(clients)
	op, err := bfsLockCycle(ctx, clients, "/t")
	if err != nil {
		t.Fatal(err)
	}
	epoch := func() uint64 {
		t.Helper()
		l, err := clients[0].LockDir(ctx, "/t/c0")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Epoch()
	}
	before := epoch()
	const ops = 20
	r, err := bench.Run(ctx, "bfs", 1, time.Minute, ops, op)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != ops || r.Errors != 0 {
		t.Fatalf("ops %d errors %d, want %d and 0", r.Ops, r.Errors, ops)
	}
	if got := epoch() - before; got != ops+1 {
		t.Errorf("the lock epoch advanced by %d over %d cycles and one lock, want %d", got, ops, ops+1)
	}
	st, err := clients[0].GetDirLock(ctx, "/t/c0")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != sdk.Unlocked {
		t.Errorf("after the cycles the directory is %v, want unlocked", st.Status)
	}
}
