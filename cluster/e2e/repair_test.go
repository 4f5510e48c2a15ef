package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// repairFlags make a nameserver notice a dead chunkserver within a second
// and check every block five times a second.
var repairFlags = []string{"--heartbeat", "100ms", "--dead-timeout", "1s", "--repair-interval", "200ms"}

// freeAddr returns a loopback address free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// metric returns the sum of the samples of name (every label set) the
// nameserver's metrics at maddr show.
func metric(t *testing.T, maddr, name string) float64 {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: clientCreds.ClientConfig("")}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + maddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics: %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// putFiles writes count files of size bytes each, of replication 3, with
// workers writers at once, and returns their contents by path.
func putFiles(t *testing.T, c *sdk.Client, count, size, workers int) map[string][]byte {
	t.Helper()
	files := make(map[string][]byte, count)
	for i := range count {
		p := fmt.Sprintf("/f%04d", i)
		files[p] = bytes.Repeat([]byte(fmt.Sprintf("%-16s", p)), size/16)
	}
	paths := make(chan string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range paths {
				if err := putFile(c, p, files[p]); err != nil {
					select {
					case errs <- fmt.Errorf("%s: %w", p, err):
					default: // one per worker is enough
					}
				}
			}
		})
	}
	for p := range files {
		paths <- p
	}
	close(paths)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return files
}

func putFile(c *sdk.Client, p string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.Create(ctx, p, sdk.Replication(3))
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	return w.Close()
}

// fullyReplicated reports whether every file has 3 replicas on distinct
// chunkservers, none of them at dead; it returns the first that has not.
func fullyReplicated(t *testing.T, c *sdk.Client, files map[string][]byte, dead string) (string, bool) {
	t.Helper()
	for p := range files {
		_, b := locate(t, c, p)
		if len(b.Replicas) != 3 || slices.Contains(b.Replicas, dead) || len(slices.Compact(slices.Sorted(slices.Values(b.Replicas)))) != 3 {
			return fmt.Sprintf("%s on %v", p, b.Replicas), false
		}
	}
	return "", true
}

// TestRepairAfterKill: 5 chunkservers, 1,000 files of 3 replicas; one
// chunkserver is killed for good, and every block is copied back to 3
// live replicas on distinct chunkservers. The time to full repair and
// the copy rate are printed, not asserted.
func TestRepairAfterKill(t *testing.T) {
	maddr := freeAddr(t)
	// Copies are small: many at once keep the disks' syncs grouped.
	c := startClusterWith(t, 5, []string{"--max-copies", "16"}, append(slices.Clone(repairFlags), "--metrics", maddr,
		"--repair-max-copies-per-server", "16", "--repair-max-copies", "64")...)
	cl := c.client()
	const files, size = 1000, 4096
	start := time.Now()
	want := putFiles(t, cl, files, size, 64)
	t.Logf("wrote %d files of %d bytes with 3 replicas in %v", files, size, time.Since(start))

	victim := 2
	held := 0
	for p := range want {
		if _, b := locate(t, cl, p); slices.Contains(b.Replicas, c.csAddrs[victim]) {
			held++
		}
	}
	dead := c.csAddrs[victim]
	copiedBefore := metric(t, maddr, "bfs_nameserver_repair_bytes_total")
	start = time.Now()
	c.killChunkserver(victim)
	waitFor(t, 30*time.Second, "the blocks of the killed chunkserver to be copied", func() bool {
		return metric(t, maddr, "bfs_nameserver_repair_copies_total") > 0 &&
			metric(t, maddr, "bfs_nameserver_under_replicated_blocks") == 0
	})
	repaired := time.Since(start)
	var last string
	waitFor(t, 20*time.Second, "every block at 3 live replicas on distinct chunkservers", func() bool {
		var ok bool
		last, ok = fullyReplicated(t, cl, want, dead)
		return ok
	})
	copied := metric(t, maddr, "bfs_nameserver_repair_bytes_total") - copiedBefore
	if int(copied) < held*size {
		t.Fatalf("copied %v bytes, want at least the %d blocks of %d bytes the dead chunkserver held (%s)", copied, held, size, last)
	}
	t.Logf("killed %s holding %d of %d blocks: all back to 3 replicas %v later (dead timeout 1s included); %.0f bytes copied, %.2f MB/s; copies: %.0f, missing blocks %.0f",
		dead, held, files, repaired, copied, copied/1e6/repaired.Seconds(),
		metric(t, maddr, "bfs_nameserver_repair_copies_total"), metric(t, maddr, "bfs_nameserver_missing_blocks"))
	// The chunkservers themselves hold what the nameserver says, for a
	// sample of the files.
	for i := 0; i < files; i += 50 {
		p := fmt.Sprintf("/f%04d", i)
		_, b := locate(t, cl, p)
		for _, addr := range b.Replicas {
			if r := readReplica(t, c.nsAddr, p, addr, b.ID); !r.sealed {
				t.Fatalf("%s: replica on %s is not sealed", p, addr)
			} else {
				requireBytes(t, want[p], r.data, "%s: replica on %s", p, addr)
			}
		}
		requireBytes(t, want[p], readFile(t, cl, p), "%s after the repair", p)
	}
}

// blockFile is where chunkserver i keeps the bytes of its replica of block
// (see chunkserver/blockstore).
func (c *cluster) blockFile(i int, block int64) string {
	u := uint64(block)
	return filepath.Join(c.dir, fmt.Sprintf("chunkserver-%d", i), "blocks",
		fmt.Sprintf("%02x", (u>>16)&0xff), fmt.Sprintf("%02x", (u>>8)&0xff), fmt.Sprintf("%016x.data", u))
}

// corrupt flips bytes of the replica of block on chunkserver i, on disk.
func (c *cluster) corrupt(i int, block int64, off int64) {
	c.t.Helper()
	f, err := os.OpenFile(c.blockFile(i, block), os.O_RDWR, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, off); err != nil {
		c.t.Fatal(err)
	}
	for j := range buf {
		buf[j] ^= 0xff
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		c.t.Fatal(err)
	}
}

// replacedAndDeleted reports whether the file's block has 3 replicas
// without bad, and bad no longer holds it.
func replacedAndDeleted(t *testing.T, cl *sdk.Client, p, bad string, block int64) bool {
	t.Helper()
	_, b := locate(t, cl, p)
	if len(b.Replicas) != 3 || slices.Contains(b.Replicas, bad) {
		return false
	}
	info, err := dialChunkserver(t, bad).GetBlockInfo(context.Background(), &bfspb.GetBlockInfoRequest{BlockId: block})
	return err == nil && info.Status == bfspb.StatusCode_NOT_FOUND
}

// TestCorruptReplicaReplaced: a replica's bytes are corrupted on disk. A
// read returns the right bytes from another replica and reports the bad
// one, which is replaced and then deleted. Then a second replica is
// corrupted while its chunkserver is down, and on its return the scrubber
// alone finds it, and it is replaced and deleted too.
func TestCorruptReplicaReplaced(t *testing.T) {
	maddr := freeAddr(t)
	// A dead timeout long enough for a chunkserver to be restarted
	// without its replicas being copied away meanwhile.
	flags := []string{"--heartbeat", "100ms", "--dead-timeout", "10s", "--repair-interval", "200ms", "--metrics", maddr}
	c := startClusterWith(t, 4, []string{"--scrub-rate", "0"}, flags...)
	cl := c.client()
	want := putFiles(t, cl, 2, 256<<10, 2)

	// A read meets the corruption: the SDK reads the first replica by
	// address first.
	_, b0 := locate(t, cl, "/f0000")
	bad := b0.Replicas[0]
	c.corrupt(c.index(bad), b0.ID, 100_000)
	requireBytes(t, want["/f0000"], readFile(t, cl, "/f0000"), "read around the corrupt replica")
	waitFor(t, 30*time.Second, "the corrupt replica read to be replaced and deleted", func() bool {
		return replacedAndDeleted(t, cl, "/f0000", bad, b0.ID)
	})
	_, now := locate(t, cl, "/f0000")
	t.Logf("block %d: replica on %s corrupted on disk, reported by the reader, replaced and deleted; now on %v",
		b0.ID, bad, now.Replicas)

	// The scrubber meets the corruption: nobody reads the block.
	_, b1 := locate(t, cl, "/f0001")
	bad = b1.Replicas[1]
	i := c.index(bad)
	c.killChunkserver(i)
	c.corrupt(i, b1.ID, 200_000)
	c.cs[i] = c.startChunkserver(i, c.csAddrs[i], "--scrub-rate", strconv.Itoa(64<<20))
	waitFor(t, 30*time.Second, "the scrubber's find to be replaced and deleted", func() bool {
		return replacedAndDeleted(t, cl, "/f0001", bad, b1.ID)
	})
	if n := c.cs[i].logCount("scrubber"); n == 0 {
		t.Fatalf("%s logged no scrubber finding", bad)
	}
	for p, data := range want {
		requireBytes(t, data, readFile(t, cl, p), "%s after the repairs", p)
	}
	t.Logf("block %d: replica on %s corrupted while it was down, found by its scrubber, replaced and deleted; %.0f corrupt replicas deleted in all",
		b1.ID, bad, metric(t, maddr, "bfs_nameserver_corrupt_replicas_deleted_total"))
}

// TestDegradedPutsReachFullReplication: with one of 3 chunkservers down,
// puts succeed with 2 replicas and say so; once it is back, they reach 3.
func TestDegradedPutsReachFullReplication(t *testing.T) {
	c := startCluster(t, 3, append(slices.Clone(repairFlags), "--min-replication", "2")...)
	cl := c.client()
	c.killChunkserver(1)
	ctx := ctxT(t, 30*time.Second)
	// Puts before the nameserver declares it dead still name it; their
	// writers drop it.
	want := putFiles(t, cl, 20, 8192, 4)
	for p := range want {
		fi, err := cl.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Replication != 3 || fi.LiveReplicas != 2 {
			t.Fatalf("%s: replication %d, %d live replicas; want 3 and 2", p, fi.Replication, fi.LiveReplicas)
		}
	}
	before := c.fsck()
	if before.Totals.UnderReplicatedBlocks != int64(len(want)) || before.Totals.MissingBlocks != 0 || len(before.Files) != len(want) {
		t.Fatalf("bfs fsck with one chunkserver down: %d files listed, totals %+v; want the %d files' blocks under-replicated, none missing",
			len(before.Files), before.Totals, len(want))
	}
	c.restartChunkserver(1)
	waitFor(t, 30*time.Second, "every file to reach 3 live replicas", func() bool {
		for p := range want {
			if fi, err := cl.Stat(ctx, p); err != nil || fi.LiveReplicas != 3 {
				return false
			}
		}
		return true
	})
	for p, data := range want {
		requireBytes(t, data, readFile(t, cl, p), "%s after the repair", p)
	}
	after := c.fsck()
	if !after.Healthy || len(after.Files) != 0 || after.Totals.UnderReplicatedBlocks != 0 {
		t.Fatalf("bfs fsck after the repair: %d files listed, totals %+v; want healthy", len(after.Files), after.Totals)
	}
	t.Logf("3 chunkservers, one down: %d puts with 2 live replicas, fsck listed %d under-replicated blocks; back to 3 and fsck healthy after it returned",
		len(want), before.Totals.UnderReplicatedBlocks)
}

// fsckReport is what bfs fsck -o json prints.
type fsckReport struct {
	Healthy bool `json:"healthy"`
	Files   []struct {
		Path string `json:"path"`
	} `json:"files"`
	Totals struct {
		Blocks                int64 `json:"blocks"`
		UnderReplicatedBlocks int64 `json:"under_replicated_blocks"`
		MissingBlocks         int64 `json:"missing_blocks"`
		CorruptBlocks         int64 `json:"corrupt_blocks"`
	} `json:"totals"`
}

// fsck runs bfs fsck -o json on the whole namespace (it exits 0: no block
// may be missing).
func (c *cluster) fsck() fsckReport {
	c.t.Helper()
	var r fsckReport
	if err := json.Unmarshal(c.bfsCommand("fsck", "/", "-o", "json"), &r); err != nil {
		c.t.Fatalf("bfs fsck -o json: %v", err)
	}
	return r
}
