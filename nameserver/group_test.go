package nameserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/bfs-go/bfs/cluster/faultnet"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// startGroup starts three nameservers behind a fault network and three
// chunkservers, and a client of the whole group.
func startGroup(t *testing.T, opts ...testcluster.Option) (*testcluster.Cluster, *faultnet.Net, *sdk.Client) {
	t.Helper()
	fn := faultnet.New()
	t.Cleanup(fn.Close)
	cl := testcluster.Start(t, append([]testcluster.Option{testcluster.WithNameServers(3), testcluster.WithFaultNet(fn),
		testcluster.WithChunkservers(3)}, opts...)...)
	c, err := sdk.Dial(context.Background(), cl.NameServerAddr, cl.AsClient(), sdk.WithSessionTTL(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return cl, fn, c
}

// waitNewLeader waits until a nameserver other than old leads, and
// returns its index.
func waitNewLeader(t *testing.T, cl *testcluster.Cluster, old int) int {
	t.Helper()
	var leader int
	require.Eventually(t, func() bool {
		leader = cl.LeaderIndex()
		return leader >= 0 && leader != old
	}, 20*time.Second, 10*time.Millisecond, "no new leader")
	return leader
}

func putBytes(t *testing.T, c *sdk.Client, path string, data []byte) {
	t.Helper()
	w, err := c.Create(context.Background(), path)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

func readBytes(t *testing.T, c *sdk.Client, path string) []byte {
	t.Helper()
	r, err := c.Open(context.Background(), path)
	require.NoError(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return b
}

// TestGroupServesThroughTheLeader: a client given the three addresses
// finds the leader; a follower asked directly answers NOT_LEADER naming
// the leader's client address, and applies nothing.
func TestGroupServesThroughTheLeader(t *testing.T) {
	cl, _, c := startGroup(t)
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, "/g", 0))
	putBytes(t, c, "/g/f", []byte("hello group"))
	require.Equal(t, []byte("hello group"), readBytes(t, c, "/g/f"))

	leader := cl.LeaderIndex()
	follower := (leader + 1) % 3
	ns := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddrs()[follower]))
	var md metadata.MD
	resp, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/from-follower"}, grpc.Trailer(&md))
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_NOT_LEADER, resp.Status, resp.Message)
	require.Equal(t, []string{cl.NameServerAddrs()[leader]}, md.Get(nameserver.LeaderTrailer))
	_, err = c.Stat(ctx, "/from-follower")
	require.ErrorIs(t, err, sdk.ErrNotFound, "a NOT_LEADER answer applied nothing")

	// Every member publishes its client address in the member table.
	var st sdk.GroupStatus
	require.Eventually(t, func() bool {
		st, err = c.GroupStatus(ctx)
		if err != nil || len(st.Members) != 3 {
			return false
		}
		for _, m := range st.Members {
			if !m.Reached || m.ClientAddress == "" {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "members: %+v", st.Members)
	require.Equal(t, fmt.Sprintf("ns%d", leader+1), st.Leader)
	for _, m := range st.Members {
		require.True(t, m.Voter)
		require.Equal(t, st.Members[0].Term, m.Term, "one term")
	}
}

// TestLockHolderSurvivesFailovers: a holder keeps its session and its
// lock across leader deaths shorter than its TTL (Done never fires), its
// file written before a failover is intact, and the epochs granted after
// grow.
func TestLockHolderSurvivesFailovers(t *testing.T) {
	cl, _, c := startGroup(t)
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, "/tablet", 0))
	l, err := c.LockDir(ctx, "/tablet")
	require.NoError(t, err)
	data := bytes.Repeat([]byte("x"), 1<<20)
	putBytes(t, c, "/tablet/before", data)
	lastEpoch := l.Epoch()
	for i := range 3 {
		old := cl.LeaderIndex()
		require.NoError(t, cl.Sandbox.StopNameServer(old))
		waitNewLeader(t, cl, old)
		require.NoError(t, cl.Sandbox.StartNameServer(old))
		// The holder's session lives on: its next keep-alive reaches the
		// new leader, which gave every session a full TTL.
		select {
		case <-l.Done():
			t.Fatalf("failover %d cost the holder its lock: %v", i, l.Err())
		default:
		}
		require.NoError(t, c.Mkdir(ctx, fmt.Sprintf("/tablet/after-%d", i), 0), "the holder still mutates inside its lock")
		require.NoError(t, c.Mkdir(ctx, fmt.Sprintf("/other-%d", i), 0))
		other, err := c.LockDir(ctx, fmt.Sprintf("/other-%d", i))
		require.NoError(t, err)
		require.Greater(t, other.Epoch(), lastEpoch, "epochs grow across failovers")
		lastEpoch = other.Epoch()
	}
	select {
	case <-l.Done():
		t.Fatalf("the lock ended: %v", l.Err())
	default:
	}
	require.Equal(t, data, readBytes(t, c, "/tablet/before"))
}

// TestPartitionedLeaderAcknowledgesNothing: a leader cut off from its
// peers, while its clients still reach it, acknowledges no mutation, grant
// or keep-alive once a new leader is elected, and chunkservers refuse its
// destructive commands (they carry its older term).
func TestPartitionedLeaderAcknowledgesNothing(t *testing.T) {
	cl, fn, c := startGroup(t)
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, "/p", 0))
	sess, err := c.Session(ctx)
	require.NoError(t, err)

	old := cl.LeaderIndex()
	oldName := fmt.Sprintf("ns%d", old+1)
	direct := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddrs()[old]))
	st, err := direct.ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	require.NoError(t, err)
	oldTerm := st.Term
	fn.Isolate(oldName, faultnet.Fault{Blackhole: true})
	t.Cleanup(fn.HealAll)
	waitNewLeader(t, cl, old)

	// The old leader still answers its clients, but acknowledges nothing.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	mk, err := direct.Mkdir(short, &bfspb.MkdirRequest{Path: "/p/stale"})
	if err == nil {
		require.NotEqual(t, bfspb.StatusCode_OK, mk.Status, "a deposed leader acknowledged a mutation")
	}
	ka, err := direct.KeepAlive(short, &bfspb.KeepAliveRequest{SessionId: sess.ID()})
	if err == nil {
		require.NotEqual(t, bfspb.StatusCode_OK, ka.Status, "a deposed leader acknowledged a keep-alive")
	}
	lk, err := direct.LockDir(short, &bfspb.LockDirRequest{Path: "/p", SessionId: sess.ID()})
	if err == nil {
		require.NotEqual(t, bfspb.StatusCode_OK, lk.Status, "a deposed leader granted a lock")
	}

	// The group goes on without it, and the mutation it was asked for was
	// never applied.
	require.NoError(t, c.Mkdir(ctx, "/p/new", 0))
	_, err = c.Stat(ctx, "/p/stale")
	require.True(t, errors.Is(err, sdk.ErrNotFound), "stat /p/stale: %v", err)

	// A chunkserver that has heard from the new leader refuses a seal of
	// the deposed leader's term. (cluster/e2e's
	// TestGroupPartitionedLeaderAcknowledgesNothing has the deposed
	// leader itself send one.)
	cs := bfspb.NewChunkServerClient(cl.DialCreds(cl.ChunkserverAddrs()[0], cl.NameServerCreds()))
	require.Eventually(t, func() bool {
		resp, err := cs.Seal(ctx, &bfspb.SealRequest{BlockId: 1 << 40, Term: oldTerm})
		return err == nil && resp.Status == bfspb.StatusCode_NOT_LEADER
	}, 10*time.Second, 20*time.Millisecond, "a chunkserver accepted a seal of the deposed leader's term %d", oldTerm)
}
