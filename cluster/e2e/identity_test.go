package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestEmptyNameServerDeletesNothing starts a nameserver on an EMPTY data
// directory, on the address of a cluster's nameserver, against the
// cluster's live chunkservers. It is another cluster (a new cluster id):
// the chunkservers must not register with it and must delete nothing,
// and both sides must say why. Restarted on its own directory, the
// nameserver must serve every file with its bytes.
func TestEmptyNameServerDeletesNothing(t *testing.T) {
	const files = 12
	c := startCluster(t, 3, "--report-interval", "500ms")
	cl := c.client()
	ctx := ctxT(t, 60*time.Second)
	if err := cl.Mkdir(ctx, "/data", 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	var blocks []int64
	for i := range files {
		p := fmt.Sprintf("/data/f%02d", i)
		want[p] = bytes.Repeat([]byte(fmt.Sprintf("%s:", p)), 1000*(i+1))
		writeFile(t, cl, p, want[p])
		_, b := locate(t, cl, p)
		blocks = append(blocks, b.ID)
	}
	before := c.replicaCount(ctx, blocks)
	t.Logf("before: %d files, %d blocks, %d replicas on %d chunkservers", files, len(blocks), before, len(c.csAddrs))
	if before != files*3 {
		t.Fatalf("%d replicas before, want %d", before, files*3)
	}

	c.killNameServer()
	empty := startDaemon(t, "nameserver", "--data", filepath.Join(c.dir, "nameserver-empty"), "--listen", c.nsAddr,
		"--metrics", "", "--report-interval", "500ms")
	// Every chunkserver tries to register again and again (with backoff)
	// and is refused each time: three refusals each span several report
	// intervals of the empty nameserver.
	for i, addr := range c.csAddrs {
		waitFor(t, 60*time.Second, fmt.Sprintf("the nameserver to refuse chunkserver %s three times", addr), func() bool {
			return empty.logCount("register refused", addr, "check the nameserver's --data directory") >= 3
		})
		waitFor(t, 10*time.Second, fmt.Sprintf("chunkserver %s to log the mismatch", addr), func() bool {
			return c.cs[i].logCount("refused", "wrong cluster", "--data directory", "--nameserver address") >= 1
		})
	}
	after := c.replicaCount(ctx, blocks)
	t.Logf("after the empty nameserver: %d replicas (%d deleted); refusals logged: nameserver %d, chunkservers %d",
		after, before-after, empty.logCount("register refused"), c.logCountAll("wrong cluster"))
	if after != before {
		t.Fatalf("%d replicas deleted on the word of a nameserver of another cluster", before-after)
	}

	empty.kill()
	c.restartNameServer()
	c.waitChunkservers()
	for p, data := range want {
		requireBytes(t, data, readFile(t, cl, p), "%s after the restart on the right directory", p)
	}
	t.Logf("restarted on the right directory: %d of %d files read back with the right bytes, %d replicas", files, files, c.replicaCount(ctx, blocks))
}

// replicaCount counts the replicas of blocks the chunkservers hold, asking
// each chunkserver directly.
func (c *cluster) replicaCount(ctx context.Context, blocks []int64) int {
	c.t.Helper()
	n := 0
	for _, addr := range c.csAddrs {
		cs := dialChunkserver(c.t, addr)
		for _, b := range blocks {
			info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: b})
			if err != nil {
				c.t.Fatalf("block %d on %s: %v", b, addr, err)
			}
			switch info.Status {
			case bfspb.StatusCode_OK:
				n++
			case bfspb.StatusCode_NOT_FOUND:
			default:
				c.t.Fatalf("block %d on %s: %v %s", b, addr, info.Status, info.Message)
			}
		}
	}
	return n
}

// logCountAll sums logCount over the running chunkservers.
func (c *cluster) logCountAll(parts ...string) int {
	n := 0
	for _, p := range c.cs {
		if p != nil {
			n += p.logCount(parts...)
		}
	}
	return n
}
