package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/sdk"
)

// bfsCommand runs the bfs binary against the cluster's nameserver and
// returns its stdout, failing the test unless it exits 0.
func (c *cluster) bfsCommand(args ...string) []byte {
	c.t.Helper()
	cmd := exec.Command(bfsBin, append([]string{"--nameserver", c.nsAddr}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("bfs %q: %v: %s", args, err, stderr.String())
	}
	return out
}

// chunkserverState returns the state bfs admin report gives the
// chunkserver at addr.
func (c *cluster) chunkserverState(addr string) string {
	c.t.Helper()
	var report struct {
		Chunkservers []struct {
			Address string `json:"address"`
			State   string `json:"state"`
		} `json:"chunkservers"`
	}
	if err := json.Unmarshal(c.bfsCommand("admin", "report", "-o", "json"), &report); err != nil {
		c.t.Fatalf("bfs admin report -o json: %v", err)
	}
	for _, s := range report.Chunkservers {
		if s.Address == addr {
			return s.State
		}
	}
	c.t.Fatalf("%s is not in the report", addr)
	return ""
}

// TestDecommissionUnderReadLoad drains one of four chunkservers while
// readers read every file in a loop: no read fails, no new block goes to
// the draining chunkserver, it becomes safe to remove once its replicas
// are copied away, every block then has its three replicas elsewhere, and
// with the chunkserver gone every file still reads back.
func TestDecommissionUnderReadLoad(t *testing.T) {
	c := startCluster(t, 4)
	cl := c.client()
	ctx := ctxT(t, 3*time.Minute)
	require.NoError(t, cl.MkdirAll(ctx, "/data", 0))
	const files = 12
	want := map[string][]byte{}
	for i := range files {
		p := fmt.Sprintf("/data/f%02d", i)
		want[p] = tablet.Pattern(p, 0, 64<<10+i*4099)
		writeFile(t, cl, p, want[p])
	}
	// The victim is a chunkserver that holds replicas.
	_, blk := locate(t, cl, "/data/f00")
	victim := blk.Replicas[0]

	var reads, failures atomic.Int64
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for g := range 4 {
		rc := c.client()
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("/data/f%02d", i%files)
				got, err := tryReadFile(rc, p)
				reads.Add(1)
				if err != nil || !bytes.Equal(got, want[p]) {
					failures.Add(1)
					t.Errorf("read %s while %s drains: %d bytes, %v", p, victim, len(got), err)
				}
			}
		}()
	}
	stopReaders := sync.OnceFunc(func() { close(stop); readers.Wait() })
	t.Cleanup(stopReaders)

	require.Contains(t, string(c.bfsCommand("admin", "decommission", victim)), victim+": ")
	require.Contains(t, []string{"draining", "decommissioned"}, c.chunkserverState(victim))
	// A new file gets no replica on the draining chunkserver.
	writeFile(t, cl, "/data/new", []byte("written while draining"))
	_, newBlk := locate(t, cl, "/data/new")
	require.NotContains(t, newBlk.Replicas, victim)
	require.Len(t, newBlk.Replicas, 3)

	waitFor(t, 2*time.Minute, victim+" to be safe to remove", func() bool {
		return c.chunkserverState(victim) == "decommissioned"
	})
	stopReaders()
	require.Zero(t, failures.Load(), "reads failed during the decommission")
	require.Positive(t, reads.Load())
	t.Logf("%d reads during the decommission, none failed", reads.Load())

	for p := range want {
		_, b := locate(t, cl, p)
		others := slices.DeleteFunc(slices.Clone(b.Replicas), func(a string) bool { return a == victim })
		require.GreaterOrEqual(t, len(others), 3, "%s: replicas %v besides the decommissioned %s", p, b.Replicas, victim)
	}
	totals, err := cl.Fsck(ctx, "/", func(f sdk.FsckFile) error { t.Errorf("fsck: %+v", f); return nil })
	require.NoError(t, err)
	require.Zero(t, totals.UnderReplicatedBlocks+totals.MissingBlocks)

	// Safe to remove means it: with it gone, every file reads back.
	c.killChunkserver(c.index(victim))
	reader := c.client()
	for p, data := range want {
		requireBytes(t, data, readFile(t, reader, p), "%s without %s", p, victim)
	}
}
