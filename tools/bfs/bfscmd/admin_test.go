package bfscmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
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
