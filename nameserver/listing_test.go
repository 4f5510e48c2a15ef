package nameserver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// listLocks pages through ListDirLocks with req's filters and page size,
// calling between (if set) after every page but the last, and returns the
// paths listed and the number of pages.
func listLocks(t *testing.T, ns bfspb.NameServerClient, req *bfspb.ListDirLocksRequest, between func(page int)) ([]string, int) {
	t.Helper()
	var paths []string
	for page := 1; ; page++ {
		resp, err := ns.ListDirLocks(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
		if req.PageSize > 0 {
			require.LessOrEqual(t, len(resp.Locks), int(req.PageSize))
		}
		for _, l := range resp.Locks {
			paths = append(paths, l.Path)
		}
		if resp.NextPageToken == "" {
			return paths, page
		}
		require.NotEmpty(t, resp.Locks, "page %d: empty, yet not the last", page)
		if between != nil {
			between(page)
		}
		req.PageToken = resp.NextPageToken
	}
}

// TestListDirLocksPages: pages of 1, of an exact divisor and of an odd
// size add up to the whole listing, in path order; a listing that ends
// exactly at a page's end reports no further page; filters apply on the
// server.
func TestListDirLocksPages(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	alice, bob := openSession(t, ns, "alice"), openSession(t, ns, "bob")
	var all, alices []string
	for i := range 20 {
		p := fmt.Sprintf("/tera/t%02d", i)
		mkdirAll(t, ns, p)
		s := alice
		if i%4 == 3 {
			s = bob
		} else {
			alices = append(alices, p)
		}
		lockAs(t, ns, p, s)
		all = append(all, p)
	}
	mkdirAll(t, ns, "/other")
	lockAs(t, ns, "/other", bob)

	for _, tc := range []struct {
		size, pages int
	}{{1, 20}, {5, 4}, {20, 1}, {7, 3}, {0, 1}} {
		got, pages := listLocks(t, ns, &bfspb.ListDirLocksRequest{Prefix: "/tera", PageSize: uint32(tc.size)}, nil)
		require.Equal(t, all, got, "page size %d", tc.size)
		require.Equal(t, tc.pages, pages, "page size %d", tc.size)
	}

	got, _ := listLocks(t, ns, &bfspb.ListDirLocksRequest{SessionId: alice, PageSize: 4}, nil)
	require.Equal(t, alices, got)
	got, _ = listLocks(t, ns, &bfspb.ListDirLocksRequest{Holder: "bob", PageSize: 2}, nil)
	require.Equal(t, []string{"/other", "/tera/t03", "/tera/t07", "/tera/t11", "/tera/t15", "/tera/t19"}, got)
	got, _ = listLocks(t, ns, &bfspb.ListDirLocksRequest{FilterStatus: true, Status: bfspb.LockStatus_LOCK_STATUS_CLEANING}, nil)
	require.Empty(t, got)
	got, _ = listLocks(t, ns, &bfspb.ListDirLocksRequest{FilterStatus: true, Status: bfspb.LockStatus_LOCK_STATUS_LOCKED, PageSize: 3}, nil)
	require.Equal(t, append([]string{"/other"}, all...), got)

	for _, bad := range []string{"!", "bm90LWEtdG9rZW4", pageTokenOf(t, ns)} {
		resp, err := ns.ListDirLocks(context.Background(), &bfspb.ListDirLocksRequest{PageToken: bad})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, resp.Status, "token %q", bad)
	}
}

// pageTokenOf returns a token of another listing (sessions).
func pageTokenOf(t *testing.T, ns bfspb.NameServerClient) string {
	t.Helper()
	resp, err := ns.ListSessions(context.Background(), &bfspb.ListSessionsRequest{PageSize: 1})
	require.NoError(t, err)
	require.NotEmpty(t, resp.NextPageToken)
	return resp.NextPageToken
}

// TestListDirLocksAcrossChanges: locks granted and released between pages
// neither break the listing nor show twice; the locks there throughout
// are all listed, in order.
func TestListDirLocksAcrossChanges(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()
	s := openSession(t, ns, "h")
	var kept []string
	for i := range 30 {
		p := fmt.Sprintf("/d/%02d", i)
		mkdirAll(t, ns, p)
		lockAs(t, ns, p, s)
		if i%10 != 5 {
			kept = append(kept, p)
		}
	}
	var behind, ahead []string
	got, _ := listLocks(t, ns, &bfspb.ListDirLocksRequest{PageSize: 4}, func(page int) {
		// Granted behind the cursor and ahead of it; released ahead of it.
		behind = append(behind, fmt.Sprintf("/d/%02d-behind", page-1))
		ahead = append(ahead, fmt.Sprintf("/d/%02d-ahead", page*4+1))
		for _, p := range []string{behind[len(behind)-1], ahead[len(ahead)-1]} {
			mkdirAll(t, ns, p)
			lockAs(t, ns, p, s)
		}
		if page <= 3 {
			un, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: fmt.Sprintf("/d/%02d", page*10-5), SessionId: s})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status, un.Message)
		}
	})
	require.True(t, slices.IsSorted(got), "%v", got)
	require.Len(t, slices.Compact(slices.Clone(got)), len(got), "listed twice: %v", got)
	for _, p := range append(kept, ahead...) {
		require.Contains(t, got, p)
	}
	for _, p := range behind {
		require.NotContains(t, got, p, "granted behind the cursor")
	}
	for _, p := range []string{"/d/05", "/d/15", "/d/25"} {
		require.NotContains(t, got, p, "released before the listing reached it")
	}
}

// TestListSessionsPages pages through sessions by id, with a holder
// filter, and counts each session's locks.
func TestListSessionsPages(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()
	held := map[string]int{}
	for i := range 9 {
		s := openSession(t, ns, fmt.Sprint("h", i%3))
		for j := range i {
			p := fmt.Sprintf("/s%d/%d", i, j)
			mkdirAll(t, ns, p)
			lockAs(t, ns, p, s)
		}
		held[s] = i
	}
	list := func(req *bfspb.ListSessionsRequest) ([]*bfspb.SessionInfo, int) {
		var out []*bfspb.SessionInfo
		for page := 1; ; page++ {
			resp, err := ns.ListSessions(ctx, req)
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
			out = append(out, resp.Sessions...)
			if resp.NextPageToken == "" {
				return out, page
			}
			req.PageToken = resp.NextPageToken
		}
	}
	for _, tc := range []struct{ size, pages int }{{1, 9}, {3, 3}, {4, 3}, {0, 1}} {
		got, pages := list(&bfspb.ListSessionsRequest{PageSize: uint32(tc.size)})
		require.Equal(t, tc.pages, pages, "page size %d", tc.size)
		require.Len(t, got, 9)
		require.True(t, slices.IsSortedFunc(got, func(a, b *bfspb.SessionInfo) int { return compare(a.SessionId, b.SessionId) }))
		for _, in := range got {
			require.EqualValues(t, held[in.SessionId], in.LockCount)
			require.Len(t, in.Locks, held[in.SessionId])
		}
	}
	got, _ := list(&bfspb.ListSessionsRequest{Holder: "h1", PageSize: 2})
	require.Len(t, got, 3)
	for _, in := range got {
		require.Equal(t, "h1", in.Holder)
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestLockHistoryPages pages through a directory's history by epoch.
func TestLockHistoryPages(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	ctx := context.Background()
	mkdirAll(t, ns, "/d")
	s := openSession(t, ns, "h")
	var epochs []uint64
	for range 10 {
		epochs = append(epochs, lockAs(t, ns, "/d", s).Epoch)
		un, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/d", SessionId: s})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_UNLOCKED, un.Status)
	}
	for _, tc := range []struct{ size, pages int }{{1, 10}, {3, 4}, {5, 2}, {10, 1}, {0, 1}} {
		req := &bfspb.GetLockHistoryRequest{Path: "/d", PageSize: uint32(tc.size)}
		var got []uint64
		for page := 1; ; page++ {
			h, err := ns.GetLockHistory(ctx, req)
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_OK, h.Status, h.Message)
			for _, e := range h.Entries {
				got = append(got, e.Epoch)
			}
			if h.NextPageToken == "" {
				require.Equal(t, tc.pages, page, "page size %d", tc.size)
				break
			}
			req.PageToken = h.NextPageToken
		}
		require.Equal(t, epochs, got, "page size %d", tc.size)
	}
	h, err := ns.GetLockHistory(ctx, &bfspb.GetLockHistoryRequest{Path: "/d", PageToken: "bad"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, h.Status)
}

// TestListDirLocksPageBytes: a page of locks with long paths is cut
// before its encoded size passes what a client accepts, and the listing
// goes on in the next page.
func TestListDirLocksPageBytes(t *testing.T) {
	c := testcluster.Start(t)
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	s := openSession(t, ns, "h")
	long := strings.Repeat("/"+strings.Repeat("x", 240), 15) // 3,615 bytes
	var all []string
	for i := range 300 { // about 1.1 MB of paths
		p := fmt.Sprintf("%s/%03d", long, i)
		mkdirAll(t, ns, p)
		lockAs(t, ns, p, s)
		all = append(all, p)
	}
	req := &bfspb.ListDirLocksRequest{PageSize: 1000}
	resp, err := ns.ListDirLocks(context.Background(), req)
	require.NoError(t, err)
	require.Less(t, len(resp.Locks), 300)
	require.LessOrEqual(t, proto.Size(resp), 1<<20+8<<10, "a page and its token")
	require.NotEmpty(t, resp.NextPageToken)
	got, pages := listLocks(t, ns, req, nil)
	require.Equal(t, all, got)
	require.Equal(t, 2, pages)

	sessions, err := ns.ListSessions(context.Background(), &bfspb.ListSessionsRequest{})
	require.NoError(t, err)
	require.Len(t, sessions.Sessions, 1)
	require.EqualValues(t, 300, sessions.Sessions[0].LockCount)
	require.Len(t, sessions.Sessions[0].Locks, 64<<10/len(all[0]), "paths listed up to 64 KiB")
}

// TestListSessionsPageBytes: thousands of sessions with long holder
// strings come in pages cut before their size passes what a client
// accepts, even at the largest page size.
func TestListSessionsPageBytes(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.Limits.MaxSessionsPerIdentity = 10_000 // one identity opens them all
	}))
	ns := bfspb.NewNameServerClient(c.Dial(c.NameServerAddr))
	const sessions = 4000 // about 1.2 MB of SessionInfo
	errs := make(chan error, 16)
	for w := range 16 {
		go func() {
			var err error
			for i := w; i < sessions && err == nil; i += 16 {
				var r *bfspb.OpenSessionResponse
				holder := fmt.Sprintf("%04d-%s", i, strings.Repeat("h", 250))
				r, err = ns.OpenSession(context.Background(), &bfspb.OpenSessionRequest{Holder: holder, TtlMs: 60000})
				if err == nil && r.Status != bfspb.StatusCode_OK {
					err = fmt.Errorf("open session: %v %s", r.Status, r.Message)
				}
			}
			errs <- err
		}()
	}
	for range 16 {
		require.NoError(t, <-errs)
	}
	req := &bfspb.ListSessionsRequest{PageSize: 100000} // capped by the server
	seen := map[string]bool{}
	for pages := 1; ; pages++ {
		resp, err := ns.ListSessions(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
		require.LessOrEqual(t, proto.Size(resp), 1<<20+1024)
		for _, s := range resp.Sessions {
			require.False(t, seen[s.SessionId], "listed twice")
			seen[s.SessionId] = true
		}
		if resp.NextPageToken == "" {
			require.Equal(t, 2, pages, "cut once by size")
			break
		}
		req.PageToken = resp.NextPageToken
	}
	require.Len(t, seen, sessions)
}
