package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/testdisk"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// volumeFlags make a nameserver take the small disks of these tests (a
// 1 MiB floor), check every block twice a second, and learn of a volume
// only through heartbeats (every second) and registrations: a full block
// report comes once an hour.
var volumeFlags = []string{"--min-free-bytes", "1048576", "--heartbeat", "1s", "--repair-interval", "500ms", "--report-interval", "1h"}

// mountTmpfs mounts a tmpfs of mib MiB at dir, unmounted at the end of
// the test; the test is skipped where this user cannot.
func mountTmpfs(t *testing.T, dir string, mib int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm", mib)); err != nil {
		t.Skipf("disks of their own need tmpfs mounts, which this user cannot make: %v", err)
	}
	// Registered before the chunkservers start, so it runs after they
	// are killed.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// volumeCluster starts a nameserver (volumeFlags and nsFlags) and four
// chunkservers, each volume on a disk of its own of like size (so that
// placement spreads new replicas over the volumes alike): chunkservers 0
// to 2 on a 256 MiB tmpfs each, chunkserver 3 on two volumes, disk (the
// disk under test) and a 256 MiB tmpfs.
func volumeCluster(t *testing.T, disk *testdisk.Disk, nsFlags ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), nsFlags: slices.Concat(volumeFlags, nsFlags),
		cs: make([]*process, 4), csAddrs: make([]string, 4)}
	for i := range 3 {
		mountTmpfs(t, filepath.Join(c.dir, fmt.Sprintf("chunkserver-%d", i)), 256)
	}
	second := filepath.Join(c.dir, "chunkserver-3b")
	mountTmpfs(t, second, 256)
	c.csExtra = map[int][]string{3: {"--data", disk.Dir + "," + second}}
	c.ns = c.startNameServer("127.0.0.1:0")
	c.nsAddr = c.ns.addr
	for i := range c.cs {
		c.cs[i] = c.startChunkserver(i, "127.0.0.1:0")
		c.csAddrs[i] = c.cs[i].addr
	}
	c.waitChunkservers()
	return c
}

// volumeFiles starts a volumeCluster on a disk of mib MiB, writes count
// files of size bytes with 4 writers, and checks that the disk under test
// holds replicas. It returns the cluster, a client, chunkserver 3's
// address and the files.
func volumeFiles(t *testing.T, disk *testdisk.Disk, count, size int) (*cluster, *sdk.Client, string, map[string][]byte) {
	t.Helper()
	c := volumeCluster(t, disk)
	cl := c.client()
	addr := c.csAddrs[3]
	files := putFiles(t, cl, count, size, 4)
	// A volume's block count reaches the report with the chunkserver's
	// next heartbeat.
	waitFor(t, 30*time.Second, "a replica on the disk under test", func() bool {
		vols, _ := c.volumes(addr)
		return vols[0].Blocks > 0
	})
	return c, cl, addr, files
}

// reportVolume is a volume as bfs admin report -o json shows it.
type reportVolume struct {
	Dir    string `json:"dir"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Blocks int64  `json:"blocks"`
}

// volumes returns the volumes of the chunkserver at addr, and its state,
// as bfs admin report -o json has them.
func (c *cluster) volumes(addr string) ([]reportVolume, string) {
	c.t.Helper()
	vols, state, err := c.tryVolumes(addr)
	if err != nil {
		c.t.Fatal(err)
	}
	return vols, state
}

// tryVolumes is volumes, for any goroutine: it returns what fails.
func (c *cluster) tryVolumes(addr string) ([]reportVolume, string, error) {
	var report struct {
		Chunkservers []struct {
			Address string         `json:"address"`
			State   string         `json:"state"`
			Volumes []reportVolume `json:"volumes"`
		} `json:"chunkservers"`
	}
	out, err := exec.Command(bfsBin, "--nameserver", c.nsAddr, "admin", "report", "-o", "json").Output()
	if err != nil {
		return nil, "", fmt.Errorf("bfs admin report -o json: %w", err)
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return nil, "", fmt.Errorf("bfs admin report -o json: %w", err)
	}
	for _, s := range report.Chunkservers {
		if s.Address == addr {
			return s.Volumes, s.State, nil
		}
	}
	return nil, "", fmt.Errorf("%s is not in the report", addr)
}

// bfsRun runs the bfs binary against the cluster and returns its output
// and exit code.
func (c *cluster) bfsRun(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	cmd := exec.Command(bfsBin, append([]string{"--nameserver", c.nsAddr}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		c.t.Fatalf("bfs %q: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// randomData returns n random bytes.
func randomData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

// goodReplicas waits until every file has 3 good replicas (stat's live
// count) and returns how long that took.
func goodReplicas(t *testing.T, cl *sdk.Client, paths []string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := ctxT(t, d)
	waitFor(t, d, "every file to have 3 good replicas", func() bool {
		for _, p := range paths {
			fi, err := cl.Stat(ctx, p)
			if err != nil {
				t.Fatalf("stat %s: %v", p, err)
			}
			if fi.LiveReplicas != 3 {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

// TestVolumeReadOnlyUnderWriters: four writers put files while one of
// chunkserver 3's two volumes, an ext4 disk, turns read-only (an ext4
// error). No put fails; the volume is out of service (the nameserver's
// report says failed), learnt from the heartbeat its check sends at once
// (block reports come once an hour, and the chunkserver stays live: the
// times are printed); the chunkserver keeps serving its other volume;
// every file ends with 3 good replicas and fsck says HEALTHY.
func TestVolumeReadOnlyUnderWriters(t *testing.T) {
	disk := testdisk.New(t, 256)
	maddr := freeAddr(t)
	c := volumeCluster(t, disk, "--metrics", maddr)
	cl := c.client()
	addr := c.csAddrs[3]
	var (
		mu     sync.Mutex
		paths  []string
		failed []string
		wg     sync.WaitGroup
		done   atomic.Int64
		stop   atomic.Bool
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				p := fmt.Sprintf("/w%d-f%03d", w, i)
				err := putFile(cl, p, randomData(256<<10))
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", p, err))
				} else {
					paths = append(paths, p)
				}
				mu.Unlock()
				done.Add(1)
			}
		})
	}
	waitFor(t, time.Minute, "40 puts and replicas on the disk to fail", func() bool {
		if done.Load() < 40 {
			return false
		}
		vols, _ := c.volumes(addr)
		return vols[0].Blocks > 0
	})
	vols, _ := c.volumes(addr)
	onDisk := vols[0].Blocks
	disk.ReadOnly()
	turned := time.Now()
	// The chunkserver's log says when its check failed the volume, the
	// nameserver's when a heartbeat told it.
	var checked, known time.Duration
	waitFor(t, 30*time.Second, "the read-only volume out of service", func() bool {
		if checked == 0 && c.cs[3].logCount(disk.Dir, "failed its check") > 0 {
			checked = time.Since(turned)
		}
		if known == 0 && c.ns.logCount(disk.Dir, "failed (") > 0 {
			known = time.Since(turned)
		}
		return checked > 0 && known > 0
	})
	vols, _ = c.volumes(addr)
	if vols[0].State != "failed" {
		t.Fatalf("the report says the read-only volume is %s", vols[0].State)
	}
	after := done.Load()
	waitFor(t, time.Minute, "40 puts more", func() bool { return done.Load() >= after+40 })
	stop.Store(true)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d puts failed with a volume out of service and three chunkservers to spare:\n%s", len(failed), done.Load(), strings.Join(failed, "\n"))
	}
	vols, state := c.volumes(addr)
	if state != "live" || vols[1].State != "healthy" {
		t.Fatalf("chunkserver 3 is %s, its other volume %s: it should serve on", state, vols[1].State)
	}
	took := goodReplicas(t, cl, paths, 2*time.Minute)
	out, stderr, code := c.bfsRun("fsck", "/")
	if code != 0 || !strings.Contains(out, "is HEALTHY") {
		t.Fatalf("bfs fsck: exit %d:\n%s%s", code, out, stderr)
	}
	t.Logf("%d puts by 4 writers, %d failed; the volume held %d replicas when it turned read-only; the chunkserver's check failed it %v later, "+
		"and the nameserver knew %v after that (heartbeat 1s, block report 1h): %s; every file had 3 good replicas %v later (%.0f repair copies), fsck HEALTHY",
		done.Load(), len(failed), onDisk, checked.Round(time.Millisecond), (known - checked).Round(time.Millisecond), vols[0].Reason,
		took.Round(time.Millisecond), metric(t, maddr, "bfs_nameserver_repair_copies_total"))

}

// TestVolumeReadErrors: one of chunkserver 3's two volumes, an ext4 disk,
// starts answering reads with I/O errors (its device cut short under the
// file system). Every file still reads back whole through the SDK; the
// chunkserver's own reads of the replicas there fail; the volume goes out
// of service, the chunkserver serves on with its other one, and every
// file ends with 3 good replicas.
func TestVolumeReadErrors(t *testing.T) {
	disk := testdisk.New(t, 256)
	c, cl, addr, files := volumeFiles(t, disk, 60, 1<<20)
	vols, _ := c.volumes(addr)
	onDisk := vols[0].Blocks
	var onCS3 []int64
	pathOf := map[int64]string{}
	for p := range files {
		_, b := locate(t, cl, p)
		if slices.Contains(b.Replicas, addr) {
			onCS3 = append(onCS3, b.ID)
			pathOf[b.ID] = p
		}
	}
	disk.FailReads(16)
	broke := time.Now()
	// Watched from now on: the reads below are what find the disk bad.
	var outOfService time.Duration
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if vols, _, err := c.tryVolumes(addr); err == nil && vols[0].State == "failed" {
				outOfService = time.Since(broke)
				return
			}
			time.Sleep(pollInterval)
		}
	}()

	// The chunkserver's reads of its replicas: those on the disk fail.
	failedDirect := 0
	for _, id := range onCS3 {
		if err := tryReadReplica(t, c.nsAddr, pathOf[id], addr, id); err != nil {
			failedDirect++
		}
	}
	// Readers read around them.
	readFailures := 0
	for p, want := range files {
		got, err := tryReadFile(cl, p)
		if err != nil || !bytes.Equal(got, want) {
			readFailures++
			t.Errorf("read %s: %v", p, err)
		}
	}
	<-watched
	if outOfService == 0 {
		t.Fatal("the volume whose reads fail was not taken out of service within a minute")
	}
	vols, state := c.volumes(addr)
	if state != "live" || vols[1].State != "healthy" {
		t.Fatalf("chunkserver 3 is %s, its other volume %s: it should serve on", state, vols[1].State)
	}
	took := goodReplicas(t, cl, slices.Collect(maps.Keys(files)), 2*time.Minute)
	out, stderr, code := c.bfsRun("fsck", "/")
	if code != 0 {
		t.Fatalf("bfs fsck: exit %d:\n%s%s", code, out, stderr)
	}
	t.Logf("%d files; the disk held %d replicas when its reads began to fail; chunkserver 3's own reads of its %d replicas: %d failed; "+
		"%d reads through the SDK failed; the volume was out of service %v later (%s); every file had 3 good replicas %v after that",
		len(files), onDisk, len(onCS3), failedDirect, readFailures, outOfService.Round(time.Millisecond), vols[0].Reason, took.Round(time.Millisecond))
	if failedDirect == 0 {
		t.Errorf("no read of a replica on the broken disk failed: the test did not break what it meant to")
	}
}

// TestVolumeFullRestart: one of chunkserver 3's two volumes, an ext4 disk,
// fills to the last byte; the chunkserver is killed with SIGKILL (its meta
// logs hold records its meta files do not) and restarted. It starts (it
// used to exit on "no space left on device" rewriting its metadata),
// reports the volume full and the other healthy, serves every replica of
// both, takes new ones on the other, and the full volume is healthy again
// once space is freed.
func TestVolumeFullRestart(t *testing.T) {
	disk := testdisk.New(t, 64)
	c, cl, addr, files := volumeFiles(t, disk, 40, 256<<10)
	filler := disk.Fill()
	c.killChunkserver(3)
	c.restartChunkserver(3)
	waitFor(t, 30*time.Second, "chunkserver 3 back, its disk full", func() bool {
		vols, state := c.volumes(addr)
		return state == "live" && len(vols) == 2 && vols[0].State == "full" && vols[1].State == "healthy"
	})
	vols, _ := c.volumes(addr)
	onFull := vols[0].Blocks
	served := 0
	for p, want := range files {
		_, b := locate(t, cl, p)
		if !slices.Contains(b.Replicas, addr) {
			continue
		}
		got := readReplica(t, c.nsAddr, p, addr, b.ID)
		requireBytes(t, want, got.data, "%s on chunkserver 3", p)
		served++
	}
	for i := range 20 {
		if err := putFile(cl, fmt.Sprintf("/more%02d", i), randomData(256<<10)); err != nil {
			t.Fatalf("put with one of chunkserver 3's volumes full: %v", err)
		}
	}
	vols, _ = c.volumes(addr)
	if vols[0].Blocks != onFull {
		t.Errorf("the full volume went from %d replicas to %d: new ones were placed there", onFull, vols[0].Blocks)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	waitFor(t, 30*time.Second, "the volume healthy again", func() bool {
		vols, _ := c.volumes(addr)
		return vols[0].State == "healthy"
	})
	t.Logf("chunkserver 3 restarted on a full volume of %d replicas and a healthy one; it served %d replicas, took no new one on the full volume, "+
		"which was healthy again %v after space was freed", onFull, served, time.Since(freed).Round(time.Millisecond))
}

// TestEveryReplicaCorrupt: every replica of a file's block is damaged on
// its chunkserver's disk. A reader gets a clear error (corrupt), never
// bytes; the chunkservers report their replicas bad; the nameserver counts
// the block missing (bfs_nameserver_missing_blocks 1) and bfs fsck exits
// 1 naming it. (Both said healthy before: a block counted as missing only
// when no replica at all was known.)
func TestEveryReplicaCorrupt(t *testing.T) {
	maddr := freeAddr(t)
	c := startCluster(t, 3, append(slices.Clone(repairFlags), "--metrics", maddr)...)
	cl := c.client()
	data := randomData(1 << 20)
	if err := putFile(cl, "/doomed", data); err != nil {
		t.Fatal(err)
	}
	if err := putFile(cl, "/fine", data); err != nil {
		t.Fatal(err)
	}
	_, b := locate(t, cl, "/doomed")
	for _, addr := range b.Replicas {
		u := uint64(b.ID)
		path := filepath.Join(c.dir, fmt.Sprintf("chunkserver-%d", c.index(addr)), "blocks",
			fmt.Sprintf("%02x", (u>>16)&0xff), fmt.Sprintf("%02x", (u>>8)&0xff), fmt.Sprintf("%016x.data", u))
		flipFileByte(t, path, 4096)
	}
	_, readErr := tryReadFile(cl, "/doomed")
	if !errors.Is(readErr, sdk.ErrCorrupt) {
		t.Fatalf("read of a file whose every replica is corrupt: %v, want an error that says corrupt", readErr)
	}
	waitFor(t, 30*time.Second, "missing_blocks 1", func() bool { return metric(t, maddr, "bfs_nameserver_missing_blocks") == 1 })
	out, stderr, code := c.bfsRun("fsck", "/")
	if code != 1 || !strings.Contains(out, "MISSING (no good replica)") || !strings.Contains(out, "is CORRUPT") {
		t.Fatalf("bfs fsck: exit %d, want 1:\n%s%s", code, out, stderr)
	}
	list, _, code := c.bfsRun("fsck", "--list-corrupt", "/")
	if code != 1 || !strings.Contains(list, fmt.Sprintf("%d\tMISSING\t/doomed", b.ID)) {
		t.Fatalf("bfs fsck --list-corrupt: exit %d:\n%s", code, list)
	}
	got, err := tryReadFile(cl, "/fine")
	if err != nil {
		t.Fatalf("the other file: %v", err)
	}
	requireBytes(t, data, got, "/fine")
	t.Logf("all %d replicas of block %d damaged: the reader got %q; missing_blocks %.0f; fsck exit %d: %s",
		len(b.Replicas), b.ID, readErr, metric(t, maddr, "bfs_nameserver_missing_blocks"), code, strings.TrimSpace(stderr))
}

// flipFileByte damages one byte of a file in place.
func flipFileByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// tryReadReplica reads all of block's replica (of the file path) through
// the chunkserver at addr's own RPCs, with the read token the nameserver
// at nsAddr gives; an error if any part fails.
func tryReadReplica(t *testing.T, nsAddr, path, addr string, block int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	loc, err := dialNameServer(t, nsAddr).GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: path})
	if err != nil || loc.Status != bfspb.StatusCode_OK || len(loc.Blocks) != 1 {
		return fmt.Errorf("location of %s: %v %v", path, loc, err)
	}
	if ctx, err = blocktoken.Attach(ctx, loc.Blocks[0].Token); err != nil {
		return err
	}
	stream, err := dialChunkserver(t, addr).Read(ctx, &bfspb.ReadRequest{BlockId: block})
	if err != nil {
		return err
	}
	for {
		chunk, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		case chunk.Status != bfspb.StatusCode_OK:
			return fmt.Errorf("%v: %s", chunk.Status, chunk.Message)
		}
	}
}
