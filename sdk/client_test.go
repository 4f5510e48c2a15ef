package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// newCluster starts a nameserver and returns a client of it.
func newCluster(t *testing.T, opts ...sdk.Option) (*testcluster.Cluster, *sdk.Client) {
	t.Helper()
	cl := testcluster.Start(t)
	return cl, dial(t, cl.NameServerAddr, append([]sdk.Option{cl.AsClient()}, opts...)...)
}

// rawClient talks to the nameserver without the SDK, to look at what the
// SDK did from the outside.
func rawClient(t *testing.T, cl *testcluster.Cluster) bfspb.NameServerClient {
	t.Helper()
	return bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr))
}

func sessionsOf(t *testing.T, ns bfspb.NameServerClient) map[string]*bfspb.SessionInfo {
	t.Helper()
	resp, err := ns.ListSessions(context.Background(), &bfspb.ListSessionsRequest{})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.GetStatus())
	out := map[string]*bfspb.SessionInfo{}
	for _, s := range resp.GetSessions() {
		out[s.GetSessionId()] = s
	}
	return out
}

func names(fis []*sdk.FileInfo) []string {
	out := make([]string, 0, len(fis))
	for _, fi := range fis {
		out = append(out, fi.Name)
	}
	return out
}

func TestMkdir(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()

	require.NoError(t, c.Mkdir(ctx, "/a", 0o750))
	fi, err := c.Stat(ctx, "/a")
	require.NoError(t, err)
	assert.True(t, fi.IsDir)
	assert.Equal(t, os.ModeDir|0o750, fi.Mode)
	assert.Equal(t, "/a", fi.Path)
	assert.Equal(t, "a", fi.Name)
	assert.NotZero(t, fi.EntryID)
	assert.WithinDuration(t, time.Now(), fi.ModTime, time.Minute)
	assert.Equal(t, sdk.Unlocked, fi.LockStatus)

	err = c.Mkdir(ctx, "/a", 0o755)
	assert.ErrorIs(t, err, sdk.ErrExists)
	assert.ErrorIs(t, err, fs.ErrExist)
	assert.EqualError(t, err, "mkdir /a: file exists")
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "/a", pe.Path)

	assert.ErrorIs(t, c.Mkdir(ctx, "/x/y", 0o755), sdk.ErrNotFound, "missing parent")
	require.NoError(t, c.Touch(ctx, "/a/f"))
	assert.ErrorIs(t, c.Mkdir(ctx, "/a/f/g", 0o755), sdk.ErrNotDirectory)

	// Mode 0 asks for the nameserver's default.
	require.NoError(t, c.Mkdir(ctx, "/dflt", 0))
	fi, err = c.Stat(ctx, "/dflt")
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o755, fi.Mode)
}

func TestMkdirAll(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()

	require.NoError(t, c.MkdirAll(ctx, "/a/b/c", 0o755))
	require.NoError(t, c.MkdirAll(ctx, "/a/b/c", 0o755), "an existing directory is fine")
	require.NoError(t, c.MkdirAll(ctx, "/a", 0o755))
	require.NoError(t, c.MkdirAll(ctx, "/", 0o755))
	for _, p := range []string{"/a", "/a/b", "/a/b/c"} {
		fi, err := c.Stat(ctx, p)
		require.NoError(t, err, p)
		assert.True(t, fi.IsDir, p)
	}

	require.NoError(t, c.Touch(ctx, "/a/f"))
	err := c.MkdirAll(ctx, "/a/f", 0o755)
	assert.ErrorIs(t, err, sdk.ErrExists, "a file is in the way")
	assert.EqualError(t, err, "mkdir /a/f: file exists")
	assert.ErrorIs(t, c.MkdirAll(ctx, "/a/f/g", 0o755), sdk.ErrNotDirectory)
}

func TestTouch(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.Mkdir(ctx, "/d", 0o755))

	require.NoError(t, c.Touch(ctx, "/d/f"))
	fi, err := c.Stat(ctx, "/d/f")
	require.NoError(t, err)
	assert.False(t, fi.IsDir)
	assert.Equal(t, os.FileMode(0o644), fi.Mode, "the SDK's default mode")
	assert.Zero(t, fi.Size)
	assert.Positive(t, fi.Replication, "the nameserver's default replication")
	assert.Empty(t, fi.WriterSession, "touch leaves the file closed")

	err = c.Touch(ctx, "/d/f")
	assert.ErrorIs(t, err, sdk.ErrExists)
	assert.EqualError(t, err, "touch /d/f: file exists")

	require.NoError(t, c.Touch(ctx, "/d/f", sdk.Overwrite(), sdk.Mode(0o600), sdk.Replication(2)))
	fi2, err := c.Stat(ctx, "/d/f")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi2.Mode)
	assert.Equal(t, 2, fi2.Replication)

	assert.ErrorIs(t, c.Touch(ctx, "/d"), sdk.ErrIsDirectory)
	assert.ErrorIs(t, c.Touch(ctx, "/d", sdk.Overwrite()), sdk.ErrIsDirectory)
	assert.ErrorIs(t, c.Touch(ctx, "/nope/f"), sdk.ErrNotFound)
	assert.ErrorIs(t, c.Touch(ctx, "/d/f/g"), sdk.ErrNotDirectory)
}

func TestStat(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()

	root, err := c.Stat(ctx, "/")
	require.NoError(t, err)
	assert.True(t, root.IsDir)
	assert.Equal(t, "/", root.Path)
	assert.Equal(t, "/", root.Name)

	require.NoError(t, c.MkdirAll(ctx, "/a/b", 0o755))
	fi, err := c.Stat(ctx, "//a/./b/")
	require.NoError(t, err)
	assert.Equal(t, "/a/b", fi.Path, "paths are normalized")

	_, err = c.Stat(ctx, "/nope")
	assert.ErrorIs(t, err, sdk.ErrNotFound)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.EqualError(t, err, "stat /nope: no such file or directory")
}

func TestList(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()

	empty, err := c.List(ctx, "/")
	require.NoError(t, err)
	assert.Empty(t, empty)

	require.NoError(t, c.MkdirAll(ctx, "/d/sub", 0o755))
	for _, n := range []string{"c", "a", "b"} {
		require.NoError(t, c.Touch(ctx, "/d/"+n))
	}
	fis, err := c.List(ctx, "/d")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "sub"}, names(fis))
	assert.Equal(t, "/d/sub", fis[3].Path)
	assert.True(t, fis[3].IsDir)
	assert.False(t, fis[0].IsDir)

	_, err = c.List(ctx, "/d/a")
	assert.ErrorIs(t, err, sdk.ErrNotDirectory)
	_, err = c.List(ctx, "/nope")
	assert.ErrorIs(t, err, sdk.ErrNotFound)
	assert.EqualError(t, err, "list /nope: no such file or directory")
}

// TestListPages lists a directory larger than the nameserver's page.
func TestListPages(t *testing.T) {
	if testing.Short() {
		t.Skip("creates over a thousand files")
	}
	_, c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.Mkdir(ctx, "/big", 0o755))
	const n = 1050 // the nameserver's default page is 1000
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("f%04d", i))
	}
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for name := range work {
				assert.NoError(t, c.Touch(ctx, "/big/"+name))
			}
		})
	}
	for _, name := range want {
		work <- name
	}
	close(work)
	wg.Wait()

	fis, err := c.List(ctx, "/big")
	require.NoError(t, err)
	assert.Equal(t, want, names(fis))
}

func TestRemove(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.Mkdir(ctx, "/d", 0o755))
	require.NoError(t, c.Touch(ctx, "/d/f"))

	require.NoError(t, c.Remove(ctx, "/d/f"))
	_, err := c.Stat(ctx, "/d/f")
	assert.ErrorIs(t, err, sdk.ErrNotFound)

	err = c.Remove(ctx, "/d/f")
	assert.ErrorIs(t, err, sdk.ErrNotFound)
	assert.EqualError(t, err, "remove /d/f: no such file or directory")
	assert.ErrorIs(t, c.Remove(ctx, "/d"), sdk.ErrIsDirectory)
}

func TestRemoveDir(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, "/d/sub/deeper", 0o755))
	require.NoError(t, c.Touch(ctx, "/d/sub/f"))
	require.NoError(t, c.Mkdir(ctx, "/e", 0o755))

	err := c.RemoveDir(ctx, "/d", false)
	assert.ErrorIs(t, err, sdk.ErrNotEmpty)
	assert.EqualError(t, err, "rmdir /d: directory not empty")
	require.NoError(t, c.RemoveDir(ctx, "/e", false), "an empty directory goes without recursive")

	require.NoError(t, c.RemoveDir(ctx, "/d", true))
	for _, p := range []string{"/d", "/d/sub", "/d/sub/f", "/e"} {
		_, err := c.Stat(ctx, p)
		assert.ErrorIs(t, err, sdk.ErrNotFound, p)
	}
	assert.ErrorIs(t, c.RemoveDir(ctx, "/d", true), sdk.ErrNotFound)
	assert.ErrorIs(t, c.RemoveDir(ctx, "/", true), sdk.ErrInvalidArgument, "the root stays")

	require.NoError(t, c.Touch(ctx, "/f"))
	assert.ErrorIs(t, c.RemoveDir(ctx, "/f", true), sdk.ErrNotDirectory)
}

func TestRename(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, "/a/b", 0o755))
	require.NoError(t, c.Mkdir(ctx, "/other", 0o755))
	require.NoError(t, c.Touch(ctx, "/a/b/f"))
	before, err := c.Stat(ctx, "/a")
	require.NoError(t, err)

	// A directory moves with its subtree and keeps its identity.
	require.NoError(t, c.Rename(ctx, "/a", "/z"))
	after, err := c.Stat(ctx, "/z")
	require.NoError(t, err)
	assert.Equal(t, before.EntryID, after.EntryID)
	_, err = c.Stat(ctx, "/z/b/f")
	require.NoError(t, err)
	_, err = c.Stat(ctx, "/a")
	assert.ErrorIs(t, err, sdk.ErrNotFound)

	// Into its own subtree: refused.
	err = c.Rename(ctx, "/z", "/z/b/z")
	assert.ErrorIs(t, err, sdk.ErrInvalidArgument)
	var le *os.LinkError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "/z", le.Old)
	assert.Equal(t, "/z/b/z", le.New)

	err = c.Rename(ctx, "/nope", "/x")
	assert.ErrorIs(t, err, sdk.ErrNotFound)
	assert.EqualError(t, err, "rename /nope /x: no such file or directory")
	assert.ErrorIs(t, c.Rename(ctx, "/z", "/other"), sdk.ErrExists, "onto an existing directory")
	assert.ErrorIs(t, c.Rename(ctx, "/z/b/f", "/missing/f"), sdk.ErrNotFound, "missing destination parent")

	// A file replaces a file.
	require.NoError(t, c.Touch(ctx, "/g", sdk.Mode(0o600)))
	require.NoError(t, c.Rename(ctx, "/g", "/z/b/f"))
	fi, err := c.Stat(ctx, "/z/b/f")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode)
}

func TestChmod(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.Mkdir(ctx, "/d", 0o755))
	require.NoError(t, c.Touch(ctx, "/d/f"))

	require.NoError(t, c.Chmod(ctx, "/d", 0o700))
	require.NoError(t, c.Chmod(ctx, "/d/f", 0o400))
	fi, err := c.Stat(ctx, "/d")
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, fi.Mode)
	fi, err = c.Stat(ctx, "/d/f")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o400), fi.Mode)

	require.NoError(t, c.Chmod(ctx, "/d", os.ModeSticky|0o777))
	fi, err = c.Stat(ctx, "/d")
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|os.ModeSticky|0o777, fi.Mode)

	assert.ErrorIs(t, c.Chmod(ctx, "/d", os.ModeDir|0o700), sdk.ErrInvalidArgument)
	err = c.Chmod(ctx, "/nope", 0o700)
	assert.ErrorIs(t, err, sdk.ErrNotFound)
	assert.EqualError(t, err, "chmod /nope: no such file or directory")
}

func TestDiskUsage(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, "/d/a/b", 0o755))
	require.NoError(t, c.Mkdir(ctx, "/d/c", 0o755))
	for _, f := range []string{"/d/f1", "/d/a/f2", "/d/a/b/f3"} {
		require.NoError(t, c.Touch(ctx, f))
	}
	u, err := c.DiskUsage(ctx, "/d")
	require.NoError(t, err)
	assert.Equal(t, sdk.Usage{Bytes: 0, Files: 3, Dirs: 4}, u, "the directory itself counts")

	u, err = c.DiskUsage(ctx, "/d/a")
	require.NoError(t, err)
	assert.Equal(t, sdk.Usage{Files: 2, Dirs: 2}, u)

	_, err = c.DiskUsage(ctx, "/nope")
	assert.ErrorIs(t, err, sdk.ErrNotFound)
	assert.EqualError(t, err, "du /nope: no such file or directory")
}

func TestBadPaths(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	bad := []string{"", "relative", "/a/../b", "/a\x00b", "/" + string(make([]byte, 5000))}
	for _, p := range bad {
		errs := map[string]error{
			"mkdir":    c.Mkdir(ctx, p, 0o755),
			"mkdirall": c.MkdirAll(ctx, p, 0o755),
			"touch":    c.Touch(ctx, p),
			"remove":   c.Remove(ctx, p),
			"rmdir":    c.RemoveDir(ctx, p, true),
			"rename":   c.Rename(ctx, p, "/x"),
			"rename2":  c.Rename(ctx, "/x", p),
			"chmod":    c.Chmod(ctx, p, 0o700),
		}
		_, errs["stat"] = c.Stat(ctx, p)
		_, errs["list"] = c.List(ctx, p)
		_, errs["du"] = c.DiskUsage(ctx, p)
		for op, err := range errs {
			assert.ErrorIs(t, err, sdk.ErrInvalidArgument, "%s %q", op, p)
		}
	}
	err := c.Mkdir(ctx, "relative", 0o755)
	assert.EqualError(t, err, `mkdir relative: invalid path: "relative" is not absolute`)
	fis, err := c.List(ctx, "/")
	require.NoError(t, err)
	assert.Empty(t, fis, "nothing was created")
}

func TestSessionOpenKeepAliveClose(t *testing.T) {
	cl := testcluster.Start(t)
	raw := rawClient(t, cl)
	const ttl = 500 * time.Millisecond
	c, err := sdk.Dial(context.Background(), cl.NameServerAddr, cl.AsClient(), sdk.WithSessionTTL(ttl))
	require.NoError(t, err)
	ctx := context.Background()

	assert.Empty(t, sessionsOf(t, raw), "no session before a call needs one")
	_, err = c.Stat(ctx, "/")
	require.NoError(t, err)
	assert.Empty(t, sessionsOf(t, raw), "reads need no session")

	require.NoError(t, c.Mkdir(ctx, "/d", 0o755))
	s, err := c.Session(ctx)
	require.NoError(t, err)
	info := sessionsOf(t, raw)[s.ID()]
	require.NotNil(t, info, "the mutation opened a session")
	assert.Equal(t, c.Holder(), info.GetHolder())
	assert.Equal(t, c.Holder(), s.Holder())
	assert.Equal(t, ttl.Milliseconds(), info.GetTtlMs())

	// Time passing is the point here: across several TTLs the keep-alive
	// holds the session.
	<-time.After(4 * ttl)
	assert.NoError(t, s.Err())
	require.Contains(t, sessionsOf(t, raw), s.ID(), "kept alive past its TTL")
	same, err := c.Session(ctx)
	require.NoError(t, err)
	assert.Same(t, s, same)

	require.NoError(t, c.Close())
	waitClosed(t, s.Done(), "session close")
	assert.ErrorIs(t, s.Err(), sdk.ErrClosed)
	assert.NotContains(t, sessionsOf(t, raw), s.ID(), "Close closed it on the nameserver")
	require.NoError(t, c.Close())
}

// TestSessionLossAndReopen has the nameserver end the client's session
// behind its back: the keep-alive learns it, Done closes, and the next
// mutation runs under a new session.
func TestSessionLossAndReopen(t *testing.T) {
	cl := testcluster.Start(t)
	raw := rawClient(t, cl)
	c := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithSessionTTL(300*time.Millisecond))
	ctx := context.Background()

	s, err := c.Session(ctx)
	require.NoError(t, err)
	resp, err := raw.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: s.ID()})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, resp.GetStatus())

	waitClosed(t, s.Done(), "session loss")
	assert.ErrorIs(t, s.Err(), sdk.ErrSessionExpired)

	require.NoError(t, c.Mkdir(ctx, "/after", 0o755))
	s2, err := c.Session(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, s.ID(), s2.ID())
	assert.Contains(t, sessionsOf(t, raw), s2.ID())
}

// TestMutationUnderExpiredSession closes the session on the nameserver and
// mutates at once, before the keep-alive can notice: the refusal is retried
// under a new session.
func TestMutationUnderExpiredSession(t *testing.T) {
	cl := testcluster.Start(t)
	raw := rawClient(t, cl)
	c := dial(t, cl.NameServerAddr, cl.AsClient()) // default TTL: no keep-alive during the test
	ctx := context.Background()

	s, err := c.Session(ctx)
	require.NoError(t, err)
	_, err = raw.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: s.ID()})
	require.NoError(t, err)

	require.NoError(t, c.Mkdir(ctx, "/d", 0o755))
	assert.ErrorIs(t, s.Err(), sdk.ErrSessionExpired)
	s2, err := c.Session(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, s.ID(), s2.ID())
}

func TestConcurrentUse(t *testing.T) {
	_, c := newCluster(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			dir := fmt.Sprintf("/w%d", i)
			if !assert.NoError(t, c.MkdirAll(ctx, dir+"/sub", 0o755)) {
				return
			}
			for j := range 5 {
				assert.NoError(t, c.Touch(ctx, fmt.Sprintf("%s/f%d", dir, j)))
			}
			_, err := c.List(ctx, dir)
			assert.NoError(t, err)
			assert.NoError(t, c.Rename(ctx, dir+"/f0", dir+"/sub/f0"))
		})
	}
	wg.Wait()
	fis, err := c.List(ctx, "/")
	require.NoError(t, err)
	got := names(fis)
	sort.Strings(got)
	assert.Len(t, got, 8)
	u, err := c.DiskUsage(ctx, "/")
	require.NoError(t, err)
	assert.Equal(t, int64(40), u.Files)
}

func TestContextCancelled(t *testing.T) {
	_, c := newCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Stat(ctx, "/")
	assert.ErrorIs(t, err, context.Canceled)
	err = c.Mkdir(ctx, "/d", 0o755)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, sdk.ErrUnavailable))
}
