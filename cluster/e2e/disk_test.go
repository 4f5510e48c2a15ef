package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bfs-go/bfs/sdk"
)

// TestFullDiskAmongFour runs four chunkservers, each on a tmpfs of its
// own, and fills one disk to the last byte. The full disk must be left
// alone once it reports less than the nameserver's free-space floor; a put
// that ran into it before must neither fail with INTERNAL nor end short
// of replicas: every file ends with 3 live replicas, on the other three
// chunkservers, and reads back whole.
func TestFullDiskAmongFour(t *testing.T) {
	const (
		files = 80
		size  = 1 << 20
		floor = 1 << 20
	)
	// Every chunkserver on a tmpfs of its own, so that free space is
	// comparable and the small one is picked until it fills.
	maddr := freeAddr(t)
	c := &cluster{t: t, dir: t.TempDir(), nsFlags: []string{"--min-free-bytes", fmt.Sprint(floor), "--heartbeat", "1s",
		"--repair-interval", "500ms", "--metrics", maddr},
		cs: make([]*process, 4), csAddrs: make([]string, 4)}
	for i := range 4 {
		mountTmpfs(t, filepath.Join(c.dir, fmt.Sprintf("chunkserver-%d", i)), 160)
	}
	small := filepath.Join(c.dir, "chunkserver-3")
	c.ns = c.startNameServer("127.0.0.1:0")
	c.nsAddr = c.ns.addr
	for i := range c.cs {
		c.cs[i] = c.startChunkserver(i, "127.0.0.1:0")
		c.csAddrs[i] = c.cs[i].addr
	}
	c.waitChunkservers()

	cl := c.client()
	ctx := ctxT(t, 3*time.Minute)
	if err := cl.Mkdir(ctx, "/full", 0o755); err != nil {
		t.Fatal(err)
	}
	// Four writers put files while the small disk fills under them. The
	// nameserver hears of it with the next heartbeat (every second): until
	// then it still places replicas there, and they meet ENOSPC.
	var (
		mu     sync.Mutex
		want   = map[string][]byte{}
		failed []string
		wg     sync.WaitGroup
		done   atomic.Int64
	)
	for w := range 4 {
		wg.Go(func() {
			for i := range files / 4 {
				p := fmt.Sprintf("/full/w%d-f%02d", w, i)
				data := make([]byte, size)
				for j := range data {
					data[j] = byte(rand.Uint32())
				}
				err := putFile(cl, p, data)
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", p, err))
				} else {
					want[p] = data
				}
				mu.Unlock()
				done.Add(1)
			}
		})
	}
	waitFor(t, 60*time.Second, "a quarter of the puts", func() bool { return done.Load() >= files/4 })
	filled := done.Load()
	fillDisk(t, small)
	wg.Wait()
	for _, f := range failed {
		if strings.Contains(f, "INTERNAL") || strings.Contains(f, sdk.ErrInternal.Error()) {
			t.Errorf("put %s: a full disk must never be an internal error", f)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d puts failed with three chunkservers to spare:\n%s", len(failed), files, strings.Join(failed, "\n"))
	}
	for p := range want {
		waitFor(t, 60*time.Second, p+" to have 3 live replicas", func() bool {
			fi, err := cl.Stat(ctx, p)
			return err == nil && fi.LiveReplicas == 3
		})
		requireBytes(t, want[p], readFile(t, cl, p), "%s", p)
	}
	// Puts after the nameserver has heard that the disk is full (its
	// heartbeats come every second) leave it alone.
	time.Sleep(2 * time.Second)
	var onFull []string
	for i := range 8 {
		p := fmt.Sprintf("/full/after-%d", i)
		data := bytes.Repeat([]byte{byte(i)}, size)
		if err := putFile(cl, p, data); err != nil {
			t.Fatalf("put %s after the disk filled: %v", p, err)
		}
		loc, _ := locate(t, cl, p)
		for _, b := range loc.Blocks {
			if len(b.Replicas) != 3 {
				t.Errorf("%s: %d replicas, want 3", p, len(b.Replicas))
			}
			if slices.Contains(b.Replicas, c.csAddrs[3]) {
				onFull = append(onFull, p)
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(small, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	t.Logf("%d puts of %d MiB by 4 writers on 4 chunkservers, one disk filled after %d (%d bytes free, floor %d): all succeeded and reached 3 live replicas, %.0f of them by a repair copy; 8 puts after: %d on the full disk",
		files, size>>20, filled, free, floor, metric(t, maddr, "bfs_nameserver_repair_copies_total"), len(onFull))
	if len(onFull) > 0 {
		t.Fatalf("puts placed on the full disk: %v", onFull)
	}
}

// fillDisk fills the file system of dir to the last byte.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := len(buf) / 2; n > 0; n /= 2 { // the last partial block
		if _, err := f.Write(buf[:n]); err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatal(err)
		}
	}
}
