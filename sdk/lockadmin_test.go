package sdk_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// pagedLocks is a nameserver serving a listing of locks page by page, as
// scripted: pages[i] is what the i-th request gets (its locks by name,
// its next token, a status other than OK), and every request is kept.
type pagedLocks struct {
	steadySession
	mu    sync.Mutex
	pages []fakePage
	reqs  []*bfspb.ListDirLocksRequest
}

type fakePage struct {
	paths  []string
	next   string
	status bfspb.StatusCode
}

func (f *pagedLocks) ListDirLocks(_ context.Context, req *bfspb.ListDirLocksRequest) (*bfspb.ListDirLocksResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	p := f.pages[min(len(f.reqs), len(f.pages))-1]
	resp := &bfspb.ListDirLocksResponse{Status: p.status, NextPageToken: p.next}
	for _, path := range p.paths {
		resp.Locks = append(resp.Locks, &bfspb.DirLock{Path: path, Status: bfspb.LockStatus_LOCK_STATUS_LOCKED})
	}
	return resp, nil
}

func (f *pagedLocks) requests() []*bfspb.ListDirLocksRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs
}

// threePages is a listing of five locks in pages of two, the last one
// short, with one empty page in between (a page the nameserver cut short
// of its filter's next match).
func threePages() []fakePage {
	return []fakePage{
		{paths: []string{"/a", "/b"}, next: "t1"},
		{paths: nil, next: "t2"},
		{paths: []string{"/c", "/d"}, next: "t3"},
		{paths: []string{"/e"}},
	}
}

func paths(t *testing.T, seq func(func(*sdk.DirLock, error) bool), stopAfter int) ([]string, error) {
	t.Helper()
	var out []string
	for l, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, l.Path)
		if len(out) == stopAfter {
			break
		}
	}
	return out, nil
}

func TestAllDirLocksPages(t *testing.T) {
	f := &pagedLocks{pages: threePages()}
	c := dial(t, serveFake(t, f))
	ctx := context.Background()
	got, err := paths(t, c.AllDirLocks(ctx, sdk.LockQuery{Prefix: "/x//", Status: sdk.Cleaning, Holder: "h", SessionID: "s", PageSize: 2}), 0)
	require.NoError(t, err)
	require.Equal(t, []string{"/a", "/b", "/c", "/d", "/e"}, got)
	reqs := f.requests()
	require.Len(t, reqs, 4)
	for i, tok := range []string{"", "t1", "t2", "t3"} {
		r := reqs[i]
		require.Equal(t, tok, r.PageToken)
		require.Equal(t, "/x", r.Prefix)
		require.True(t, r.FilterStatus)
		require.Equal(t, bfspb.LockStatus_LOCK_STATUS_CLEANING, r.Status)
		require.Equal(t, "h", r.Holder)
		require.Equal(t, "s", r.SessionId)
		require.EqualValues(t, 2, r.PageSize)
	}

	// The slice form collects every page.
	f = &pagedLocks{pages: threePages()}
	c = dial(t, serveFake(t, f))
	all, err := c.ListDirLocks(ctx, "/", nil)
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.False(t, f.requests()[0].FilterStatus)
}

// TestAllDirLocksStopsEarly: a loop that stops after three locks has
// asked for the pages it needed and no more.
func TestAllDirLocksStopsEarly(t *testing.T) {
	f := &pagedLocks{pages: threePages()}
	c := dial(t, serveFake(t, f))
	got, err := paths(t, c.AllDirLocks(context.Background(), sdk.LockQuery{PageSize: 2}), 3)
	require.NoError(t, err)
	require.Equal(t, []string{"/a", "/b", "/c"}, got)
	require.Len(t, f.requests(), 3)
}

// TestAllDirLocksErrors: a failure is yielded once, after the locks of
// the pages before it, and ends the listing.
func TestAllDirLocksErrors(t *testing.T) {
	ctx := context.Background()
	f := &pagedLocks{pages: []fakePage{{paths: []string{"/a"}, next: "t1"}, {status: bfspb.StatusCode_INVALID_ARGUMENT}}}
	c := dial(t, serveFake(t, f))
	var got []string
	var errs []error
	for l, err := range c.AllDirLocks(ctx, sdk.LockQuery{}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, l.Path)
	}
	require.Equal(t, []string{"/a"}, got)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], sdk.ErrInvalidArgument)

	// A nameserver that does not move past a token is not asked forever.
	f = &pagedLocks{pages: []fakePage{{next: "t"}}}
	c = dial(t, serveFake(t, f))
	_, err := paths(t, c.AllDirLocks(ctx, sdk.LockQuery{}), 0)
	require.ErrorIs(t, err, sdk.ErrInternal)
	require.Len(t, f.requests(), 2)

	// Bad input never reaches the nameserver.
	_, err = paths(t, c.AllDirLocks(ctx, sdk.LockQuery{PageSize: -1}), 0)
	require.ErrorIs(t, err, sdk.ErrInvalidArgument)
	_, err = paths(t, c.AllDirLocks(ctx, sdk.LockQuery{Prefix: "rel"}), 0)
	require.ErrorIs(t, err, sdk.ErrInvalidArgument)
	require.Len(t, f.requests(), 2)
	unlocked := sdk.Unlocked
	none, err := c.ListDirLocks(ctx, "/", &unlocked)
	require.NoError(t, err)
	require.Empty(t, none)
	require.Len(t, f.requests(), 2)
}

// TestAllSessionsAndHistoryPages pages through sessions and a lock
// history on a real nameserver, a page of one at a time.
func TestAllSessionsAndHistoryPages(t *testing.T) {
	cl := startCluster(t, 0)
	ctx := context.Background()
	var holders []string
	for i := range 3 {
		h := "h" + strconv.Itoa(i)
		c := dial(t, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder(h))
		require.NoError(t, c.MkdirAll(ctx, "/d"+strconv.Itoa(i), 0))
		l, err := c.LockDir(ctx, "/d"+strconv.Itoa(i))
		require.NoError(t, err)
		if i == 0 {
			for range 4 {
				require.NoError(t, l.Unlock(ctx))
				l, err = c.LockDir(ctx, "/d0")
				require.NoError(t, err)
			}
		}
		holders = append(holders, h)
	}
	admin := dial(t, cl.NameServerAddr, cl.AsClient())
	var seen []string
	for s, err := range admin.AllSessions(ctx, sdk.SessionQuery{PageSize: 1}) {
		require.NoError(t, err)
		seen = append(seen, s.Holder)
		require.EqualValues(t, 1, s.LockCount, "%s", s.Holder)
		require.Len(t, s.Locks, 1)
	}
	require.ElementsMatch(t, holders, seen)
	for s, err := range admin.AllSessions(ctx, sdk.SessionQuery{Holder: "h2"}) {
		require.NoError(t, err)
		require.Equal(t, "h2", s.Holder)
		require.Equal(t, []string{"/d2"}, s.Locks)
	}
	var epochs []uint64
	for e, err := range admin.AllLockHistory(ctx, "/d0", 1) {
		require.NoError(t, err)
		epochs = append(epochs, e.Epoch)
	}
	require.Len(t, epochs, 4)
	require.IsIncreasing(t, epochs)
	hist, err := admin.LockHistory(ctx, "/d0")
	require.NoError(t, err)
	require.Len(t, hist, 4)
	_, err = admin.LockHistory(ctx, "/nope")
	require.ErrorIs(t, err, sdk.ErrNotFound)
}
