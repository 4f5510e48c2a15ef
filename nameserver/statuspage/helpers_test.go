package statuspage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/connpool"
	"github.com/bfs-go/bfs/nameserver/statuspage"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// get fetches path from the nameserver's HTTP port and returns the
// status and body.
func get(t testing.TB, cl *testcluster.Cluster, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + cl.NameServerHTTPAddr() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// getJSON fetches path and decodes its JSON into v, requiring 200.
func getJSON(t testing.TB, cl *testcluster.Cluster, path string, v any) {
	t.Helper()
	code, body := get(t, cl, path)
	require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	require.NoError(t, json.Unmarshal(body, v), "%s: %s", path, body)
}

// lockJSON is /api/lock?path=p.
func lockJSON(t testing.TB, cl *testcluster.Cluster, p string) statuspage.LockDetail {
	t.Helper()
	var d statuspage.LockDetail
	getJSON(t, cl, "/api/lock?path="+url.QueryEscape(p), &d)
	return d
}

// requireAgrees checks the page's JSON view of a lock against the SDK's.
func requireAgrees(t testing.TB, want *sdk.DirLock, got statuspage.Lock) {
	t.Helper()
	require.Equal(t, want.Path, got.Path)
	require.Equal(t, stateOf(want.Status), got.State)
	require.Equal(t, want.Holder, got.Holder)
	require.Equal(t, want.Epoch, got.Epoch)
	require.Equal(t, len(want.Pending), got.PendingFiles)
	if want.SessionID != "" {
		require.Equal(t, want.SessionID[:8]+"…", got.Session, "only a prefix of the session id")
	}
}

func stateOf(s sdk.LockStatus) string {
	switch s {
	case sdk.Locked:
		return "LOCKED"
	case sdk.Cleaning:
		return "CLEANING"
	}
	return "UNLOCKED"
}

func dialSDK(t testing.TB, cl *testcluster.Cluster, holder string) *sdk.Client {
	t.Helper()
	c, err := sdk.Dial(context.Background(), cl.NameServerAddr, sdk.WithHolder(holder))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// sealGate holds the nameserver's Seal RPCs to the chunkservers (through
// TestingKnobs.DialChunkserver) of the blocks the test holds, until it
// releases them: a cleaning's pending files then fall as the test says.
type sealGate struct {
	pool *connpool.Pool
	mu   struct {
		sync.Mutex
		held    map[int64]bool
		changed chan struct{}
	}
}

func newSealGate(t testing.TB) *sealGate {
	g := &sealGate{pool: connpool.New(grpc.WithTransportCredentials(insecure.NewCredentials()))}
	g.mu.held = map[int64]bool{}
	g.mu.changed = make(chan struct{})
	t.Cleanup(func() { g.pool.Close() })
	return g
}

func (g *sealGate) dial(addr string) (bfspb.ChunkServerClient, error) {
	conn, err := g.pool.Conn(addr)
	if err != nil {
		return nil, err
	}
	return gatedClient{ChunkServerClient: bfspb.NewChunkServerClient(conn), g: g}, nil
}

// hold holds the seals of blocks.
func (g *sealGate) hold(blocks ...int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range blocks {
		g.mu.held[b] = true
	}
}

// release lets the seals of blocks through (all of them with none named).
func (g *sealGate) release(blocks ...int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range blocks {
		delete(g.mu.held, b)
	}
	if len(blocks) == 0 {
		clear(g.mu.held)
	}
	close(g.mu.changed)
	g.mu.changed = make(chan struct{})
}

func (g *sealGate) wait(ctx context.Context, block int64) error {
	for {
		g.mu.Lock()
		held, changed := g.mu.held[block], g.mu.changed
		g.mu.Unlock()
		if !held {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

type gatedClient struct {
	bfspb.ChunkServerClient
	g *sealGate
}

func (c gatedClient) Seal(ctx context.Context, req *bfspb.SealRequest, opts ...grpc.CallOption) (*bfspb.SealResponse, error) {
	if err := c.g.wait(ctx, req.BlockId); err != nil {
		return nil, err
	}
	return c.ChunkServerClient.Seal(ctx, req, opts...)
}

// latch is a gate opened once, for good.
type latch struct {
	once sync.Once
	c    chan struct{}
}

func newLatch() *latch     { return &latch{c: make(chan struct{})} }
func (l *latch) open()     { l.once.Do(func() { close(l.c) }) }
func (l *latch) waitOpen() { <-l.c }

// openFiles has the holder create n files under dir, each with some bytes
// synced, left open for write; it returns them and their blocks.
func openFiles(t testing.TB, c *sdk.Client, dir string, n int) ([]*sdk.Writer, []int64) {
	t.Helper()
	ctx := context.Background()
	writers := make([]*sdk.Writer, n)
	blocks := make([]int64, n)
	for i := range n {
		p := fmt.Sprintf("%s/f%03d", dir, i)
		w, err := c.Create(ctx, p)
		require.NoError(t, err)
		_, err = w.Write(make([]byte, 4096))
		require.NoError(t, err)
		require.NoError(t, w.Sync(ctx))
		loc, err := c.Locate(ctx, p)
		require.NoError(t, err)
		require.Len(t, loc.Blocks, 1)
		writers[i], blocks[i] = w, loc.Blocks[0].ID
	}
	t.Cleanup(func() {
		for _, w := range writers {
			_ = w.Close() // fenced by the forced unlock: refused, but its goroutines end
		}
	})
	return writers, blocks
}

// eventually polls cond until it holds, failing after a deadline.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond) // polls an outcome: nothing to wait on
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
