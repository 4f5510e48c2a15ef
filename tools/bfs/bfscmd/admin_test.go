package bfscmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

func TestAdminSafeMode(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	ok := func(args ...string) string {
		t.Helper()
		r := bfs(t, cl, args...)
		require.Equal(t, 0, r.code, "bfs %q: %s", args, r.stderr)
		return r.stdout
	}
	require.Regexp(t, `^safe mode OFF: 0 of 0 known blocks reported \(100\.00%, threshold 99\.90%\), [01] chunkservers \(0 wanted\)\n$`, ok("admin", "safemode", "get"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	w, err := c.Create(ctx, "/f", sdk.Replication(1))
	require.NoError(t, err)
	_, err = w.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Close())

	cl.StopChunkserver(0)
	cl.RestartNameServer()
	require.Equal(t, "safe mode ON: 0 of 1 known blocks reported (0.00%, threshold 99.90%), 0 chunkservers (0 wanted)\n", ok("admin", "safemode", "get"))
	require.Equal(t, "safe mode OFF (left by an operator): 0 of 1 known blocks reported (0.00%, threshold 99.90%), 0 chunkservers (0 wanted)\n", ok("admin", "safemode", "leave"))
	r := bfs(t, cl, "admin", "safemode", "enter")
	require.Equal(t, 2, r.code, r.stderr)
}

func TestAdminDecommissionReportFsck(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	for _, f := range []struct {
		path string
		r    int
	}{{"/f", 1}, {"/g", 3}} {
		w, err := c.Create(ctx, f.path, sdk.Replication(f.r))
		require.NoError(t, err)
		_, err = w.Write([]byte("data"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	only := loc.Blocks[0].Replicas[0]

	ok := func(args ...string) string {
		t.Helper()
		r := bfs(t, cl, args...)
		require.Equal(t, 0, r.code, "bfs %q: %s", args, r.stderr)
		return r.stdout
	}
	out := ok("admin", "report")
	require.Contains(t, out, "Chunkservers: 3 live, 0 draining, 0 decommissioned, 0 dead\n")
	require.Contains(t, out, "Volumes of live chunkservers: 3 healthy, 0 full, 0 failed\n")
	require.Regexp(t, `Blocks: \d+ under-replicated, 0 missing \(no good replica\), 0 corrupt replicas; repair: \d+ queued, \d+ copies in flight\n`, out)
	for i, a := range cl.ChunkserverAddrs() {
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(a)+` +\S+ +live .* 1 +- +\S+ ago +\S+ ago$`, out)
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(a)+` +`+regexp.QuoteMeta(cl.ChunkserverConfig(i).DataDir)+` +healthy `, out)
	}
	var report struct {
		Chunkservers []struct {
			Address string `json:"address"`
			State   string `json:"state"`
			Blocks  int64  `json:"blocks"`
			Volumes []struct {
				Dir   string `json:"dir"`
				State string `json:"state"`
			} `json:"volumes"`
		} `json:"chunkservers"`
		Health struct {
			Missing int64 `json:"missing_blocks"`
		} `json:"health"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok("admin", "report", "-o", "json")), &report))
	require.Len(t, report.Chunkservers, 3)
	for _, c := range report.Chunkservers {
		require.Len(t, c.Volumes, 1)
		require.Equal(t, "healthy", c.Volumes[0].State)
	}

	// Another holds /g only, which no other chunkserver can take: it
	// drains, with or without a repair running, and never gets there.
	other := cl.ChunkserverAddrs()[(slices.Index(cl.ChunkserverAddrs(), only)+1)%3]
	require.Equal(t, other+": draining: 1 blocks still to copy elsewhere\n", ok("admin", "decommission", other))
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(other)+` +\S+ +draining `, ok("admin", "report"))
	require.Equal(t, other+": live\n", ok("admin", "decommission", "--cancel", other))

	r := bfs(t, cl, "admin", "decommission", "127.0.0.1:1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `decommission: unknown chunkserver "127.0.0.1:1" (bfs admin report lists the known ones); nothing changed`)
	require.Equal(t, 2, bfs(t, cl, "admin", "decommission").code)
	require.Equal(t, 2, bfs(t, cl, "admin", "report", "-o", "yaml").code)
	require.Equal(t, 2, bfs(t, cl, "fsck", "/a", "/b").code)
	r = bfs(t, cl, "fsck", "relative")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "invalid path")

	out = ok("fsck")
	require.Contains(t, out, "The file system under / is HEALTHY\n")
	require.Regexp(t, `Files: +2 \(0 open for write\)`, out)
	require.Contains(t, ok("admin", "fsck", "/g"), "HEALTHY")

	cl.StopChunkserver(slices.Index(cl.ChunkserverAddrs(), only))
	require.Eventually(t, func() bool {
		return strings.Contains(bfs(t, cl, "admin", "report").stdout, "2 live, 0 draining, 0 decommissioned, 1 dead")
	}, 30*time.Second, 10*time.Millisecond)
	r = bfs(t, cl, "fsck", "/")
	require.Equal(t, 1, r.code, r.stderr)
	require.Regexp(t, `(?m)^/f: 4 bytes, replication 1\n  block \d+ \(4 bytes\): MISSING \(no good replica\)\n`, r.stdout)
	require.Regexp(t, `(?m)^/g: 4 bytes, replication 3\n  block \d+ \(4 bytes\): UNDER-REPLICATED \(2 of 3\); replicas `, r.stdout)
	require.Regexp(t, `Missing blocks: +1\n`, r.stdout)
	require.Contains(t, r.stdout, "The file system under / is CORRUPT\n")
	require.Equal(t, "bfs: fsck /: 1 blocks have no good replica\n", r.stderr)

	r = bfs(t, cl, "fsck", "--list-corrupt", "/")
	require.Equal(t, 1, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("%d\tMISSING\t/f\n", loc.Blocks[0].ID)+"1 blocks with no good replica, 0 with a corrupt replica under /\n", r.stdout)

	r = bfs(t, cl, "fsck", "-o", "json")
	require.Equal(t, 1, r.code)
	var fsck struct {
		Healthy bool `json:"healthy"`
		Files   []struct {
			Path string `json:"path"`
		} `json:"files"`
		Totals struct {
			Missing int `json:"missing_blocks"`
		} `json:"totals"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &fsck))
	require.False(t, fsck.Healthy)
	require.Len(t, fsck.Files, 2)
	require.Equal(t, 1, fsck.Totals.Missing)
}

// TestFsckOverReplicated: a chunkserver that comes back after its
// replicas were made again elsewhere leaves its blocks with one replica
// too many until the repair trims it (held here by safe mode, which
// lasts after a restart until an operator ends it). fsck says so in the
// nameserver's answer, in text (OVER-REPLICATED (4 of 3), the
// over-replicated count) and in JSON, and the file system is HEALTHY;
// once safe mode ends the excess replica is trimmed.
func TestFsckOverReplicated(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(4), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.SafeModeMinChunkservers = 5 // more than there are: safe mode lasts until left
		cfg.RepairInterval = 100 * time.Millisecond
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.LeaveSafeMode(ctx))
	w, err := c.Create(ctx, "/f", sdk.Replication(3))
	require.NoError(t, err)
	_, err = w.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	block, away := loc.Blocks[0].ID, loc.Blocks[0].Replicas[0]
	i := slices.Index(cl.ChunkserverAddrs(), away)
	require.GreaterOrEqual(t, i, 0)

	cl.StopChunkserver(i)
	require.Eventually(t, func() bool {
		loc, err := c.Locate(ctx, "/f")
		require.NoError(t, err)
		return len(loc.Blocks[0].Replicas) == 3 && !slices.Contains(loc.Blocks[0].Replicas, away)
	}, 30*time.Second, 20*time.Millisecond, "the replica made again on the fourth chunkserver")
	cl.RestartNameServer() // in safe mode from now on
	cl.RestartChunkserver(i)

	var files []sdk.FsckFile
	require.Eventually(t, func() bool {
		files = nil
		totals, err := c.Fsck(ctx, "/", func(f sdk.FsckFile) error { files = append(files, f); return nil })
		require.NoError(t, err)
		return totals.OverReplicatedBlocks == 1
	}, 30*time.Second, 20*time.Millisecond, "the block with 4 good replicas for 3")
	totals, err := c.Fsck(ctx, "/", func(sdk.FsckFile) error { return nil })
	require.NoError(t, err)
	require.True(t, totals.SafeMode)
	require.True(t, totals.Healthy())
	require.Zero(t, totals.UnderReplicatedBlocks+totals.MissingBlocks+totals.CorruptBlocks, "%+v", totals)
	require.Len(t, files, 1)
	require.Equal(t, "/f", files[0].Path)
	require.Len(t, files[0].Blocks, 1)
	b := files[0].Blocks[0]
	require.Equal(t, block, b.ID)
	require.True(t, b.OverReplicated)
	require.False(t, b.UnderReplicated || b.Missing)
	require.Len(t, b.Replicas, 4)
	require.Contains(t, b.Replicas, away)

	r := bfs(t, cl, "fsck", "/")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`(?m)^/f: 4 bytes, replication 3\n  block %d \(4 bytes\): OVER-REPLICATED \(4 of 3\); replicas \S+ \S+ \S+ \S+\n`, block), r.stdout)
	require.Regexp(t, `Over-replicated blocks: +1\n`, r.stdout)
	require.Regexp(t, `Under-replicated blocks: +0\n`, r.stdout)
	require.Contains(t, r.stdout, "The file system under / is HEALTHY\n")
	require.Contains(t, r.stderr, "the nameserver is in safe mode")

	r = bfs(t, cl, "fsck", "-o", "json", "/")
	require.Equal(t, 0, r.code, r.stderr)
	var doc struct {
		Healthy bool `json:"healthy"`
		Files   []struct {
			Path   string `json:"path"`
			Blocks []struct {
				ID             int64    `json:"block_id"`
				Replicas       []string `json:"replicas"`
				OverReplicated bool     `json:"over_replicated"`
			} `json:"blocks"`
		} `json:"files"`
		Totals struct {
			Over     int  `json:"over_replicated_blocks"`
			SafeMode bool `json:"safe_mode"`
		} `json:"totals"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.True(t, doc.Healthy)
	require.Equal(t, 1, doc.Totals.Over)
	require.True(t, doc.Totals.SafeMode)
	require.Len(t, doc.Files, 1)
	require.Equal(t, block, doc.Files[0].Blocks[0].ID)
	require.True(t, doc.Files[0].Blocks[0].OverReplicated)
	require.Len(t, doc.Files[0].Blocks[0].Replicas, 4)

	// Out of safe mode the excess replica goes.
	require.NoError(t, c.LeaveSafeMode(ctx))
	require.Eventually(t, func() bool {
		totals, err := c.Fsck(ctx, "/", func(sdk.FsckFile) error { return nil })
		require.NoError(t, err)
		return totals.OverReplicatedBlocks == 0
	}, 30*time.Second, 20*time.Millisecond, "the excess replica trimmed")
	r = bfs(t, cl, "fsck", "/")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `Over-replicated blocks: +0\n`, r.stdout)
	require.NotContains(t, r.stdout, "OVER-REPLICATED")
}

// TestReportVolumeRowsAndListCorrupt: bfs admin report in text, for a
// chunkserver with a healthy, a full and a failed volume (it did not
// open) on disks with other data on them: the header's volume counts and
// non-DFS used, the chunkserver's line (capacity, non-DFS used, free, its
// volumes and how many failed) and a line per volume with its state,
// non-DFS used and reason. And fsck --list-corrupt's CORRUPT line for a
// block with a corrupt replica and good ones (exit 0: it has good
// replicas).
func TestReportVolumeRowsAndListCorrupt(t *testing.T) {
	const gib = 1 << 30
	base := t.TempDir()
	full, failed := filepath.Join(base, "full"), filepath.Join(base, "failed")
	require.NoError(t, os.WriteFile(failed, []byte("a file, not a directory"), 0o644))
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithChunkserverConfig(func(i int, cfg *chunkserver.Config) {
		if i == 0 {
			cfg.DataDirs = []string{cfg.DataDir, full, failed}
		}
		// Every disk holds 100 GiB, 60 of them other data: full holds 99,
		// less free space than the nameserver's policy keeps (5%).
		cfg.TestingKnobs.DiskSpace = func(dir string) (int64, int64) {
			if dir == full {
				return 100 * gib, 1 * gib
			}
			return 100 * gib, 40 * gib
		}
	}))
	addr := cl.ChunkserverAddrs()[0]
	var out string
	require.Eventually(t, func() bool {
		r := bfs(t, cl, "admin", "report")
		out = r.stdout
		return r.code == 0 && strings.Contains(out, "Volumes of live chunkservers: 3 healthy, 1 full, 1 failed\n")
	}, 30*time.Second, 20*time.Millisecond, "the full volume reported")
	t.Logf("bfs admin report:\n%s", out)
	require.Contains(t, out, "Chunkservers: 3 live, 0 draining, 0 decommissioned, 0 dead\n")
	require.Regexp(t, `(?m)^Capacity: 400\.0 GiB, used \d+ B, non-DFS used 279\.0 GiB, free 121\.0 GiB \(0\.0% used\)$`, out)
	q := regexp.QuoteMeta
	require.Regexp(t, `(?m)^`+q(addr)+` +\S+ +live +200\.0 GiB +\d+ B +159\.0 GiB +41\.0 GiB +0\.0% +\d+ +3 \(1 failed\) +- +\S+ ago +\S+ ago$`, out)
	for _, a := range cl.ChunkserverAddrs()[1:] {
		require.Regexp(t, `(?m)^`+q(a)+` +\S+ +live +100\.0 GiB +\d+ B +60\.0 GiB +40\.0 GiB +0\.0% +\d+ +1 +- `, out)
	}
	require.Regexp(t, `(?m)^`+q(addr)+` +`+q(cl.ChunkserverConfig(0).DataDir)+` +healthy +100\.0 GiB +\d+ B +60\.0 GiB +40\.0 GiB +\d+ +\S+ ago +-$`, out)
	require.Regexp(t, `(?m)^`+q(addr)+` +`+q(full)+` +full +100\.0 GiB +0 B +99\.0 GiB +1\.0 GiB +0 +\S+ ago +1073741824 bytes free, no more than the 5368709120 the placement policy keeps free$`, out)
	require.Regexp(t, `(?m)^`+q(addr)+` +`+q(failed)+` +failed +0 B +0 B +0 B +0 B +0 +\S+ ago +\S.*not a directory$`, out)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	w, err := c.Create(ctx, "/g", sdk.Replication(3))
	require.NoError(t, err)
	_, err = w.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	loc, err := c.Locate(ctx, "/g")
	require.NoError(t, err)
	require.Len(t, loc.Blocks[0].Replicas, 3)
	// One replica reported corrupt by its own chunkserver (a client's
	// report is only a hint, verified): the block has two good ones, and
	// no chunkserver to make a third on.
	bad := loc.Blocks[0].Replicas[1]
	i := slices.Index(cl.ChunkserverAddrs(), bad)
	require.GreaterOrEqual(t, i, 0)
	resp, err := bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, cl.ChunkserverCreds(i))).ReportBadReplicas(ctx,
		&bfspb.ReportBadReplicasRequest{ChunkserverId: int64(i + 1), Address: bad,
			Replicas: []*bfspb.BadReplica{{BlockId: loc.Blocks[0].ID, Address: bad, Reason: "checksum mismatch"}}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	r := bfs(t, cl, "fsck", "--list-corrupt", "/")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("%d\tCORRUPT\t/g\n", loc.Blocks[0].ID)+"0 blocks with no good replica, 1 with a corrupt replica under /\n", r.stdout)
	require.Contains(t, bfs(t, cl, "admin", "report").stdout, " 0 missing (no good replica), 1 corrupt replicas;")
}
