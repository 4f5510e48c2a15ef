package statuspage_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/nameserver/statuspage"
	"github.com/bfs-go/bfs/sdk"
)

// TestAPIAgreesWithSDK: every JSON listing (paged, filtered) holds what
// the SDK lists, the summary counts what is there, every HTML page shows
// it, and no full session id is shown anywhere.
func TestAPIAgreesWithSDK(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Insecure(), testcluster.WithChunkservers(3), testcluster.WithHTTP())
	ctx := context.Background()
	a, b := dialSDK(t, cl, "tablet-a"), dialSDK(t, cl, "tablet-b")
	for i := range 5 {
		require.NoError(t, a.MkdirAll(ctx, fmt.Sprintf("/t/a%d", i), 0))
		_, err := a.LockDir(ctx, fmt.Sprintf("/t/a%d", i))
		require.NoError(t, err)
	}
	for i := range 2 {
		require.NoError(t, b.MkdirAll(ctx, fmt.Sprintf("/t/b%d", i), 0))
		_, err := b.LockDir(ctx, fmt.Sprintf("/t/b%d", i))
		require.NoError(t, err)
	}
	w, err := a.Create(ctx, "/t/a0/log")
	require.NoError(t, err)
	_, err = w.Write([]byte("bytes"))
	require.NoError(t, err)
	require.NoError(t, w.Close())

	// Locks, two to a page, follow the SDK's listing.
	var all []*sdk.DirLock
	for l, err := range a.AllDirLocks(ctx, sdk.LockQuery{}) {
		require.NoError(t, err)
		all = append(all, l)
	}
	require.Len(t, all, 7)
	var pages []statuspage.Lock
	for page, n := "", 0; ; n++ {
		var p statuspage.LockPage
		getJSON(t, cl, "/api/locks?limit=2&page="+url.QueryEscape(page), &p)
		require.LessOrEqual(t, len(p.Locks), 2)
		pages = append(pages, p.Locks...)
		if page = p.NextPage; page == "" {
			break
		}
		require.Less(t, n, 10, "the pages never end")
	}
	require.Len(t, pages, len(all))
	for i := range all {
		requireAgrees(t, all[i], pages[i])
	}
	var held statuspage.LockPage
	getJSON(t, cl, "/api/locks?holder=tablet-b&state=locked", &held)
	require.Equal(t, []string{"/t/b0", "/t/b1"}, lockPaths(held.Locks))
	getJSON(t, cl, "/api/locks?state=cleaning", &held)
	require.Empty(t, held.Locks)

	// Sessions: their ids as prefixes only.
	sessions, err := a.Sessions(ctx)
	require.NoError(t, err)
	var sp statuspage.SessionPage
	getJSON(t, cl, "/api/sessions", &sp)
	require.Len(t, sp.Sessions, len(sessions))
	for i, s := range sessions {
		require.Equal(t, s.ID[:8]+"…", sp.Sessions[i].ID)
		require.Equal(t, s.Holder, sp.Sessions[i].Holder)
		require.Equal(t, s.LockCount, sp.Sessions[i].Locks)
	}

	// Chunkservers.
	css, err := a.Chunkservers(ctx)
	require.NoError(t, err)
	var cp statuspage.ChunkserverPage
	getJSON(t, cl, "/api/chunkservers", &cp)
	require.Len(t, cp.Chunkservers, 3)
	for i, c := range css {
		require.Equal(t, c.Address, cp.Chunkservers[i].Address)
		require.Equal(t, "LIVE", cp.Chunkservers[i].State)
		require.Equal(t, c.Blocks, cp.Chunkservers[i].Blocks)
		require.Equal(t, c.Capacity, cp.Chunkservers[i].CapacityBytes)
	}

	// The summary.
	var s statuspage.Summary
	getJSON(t, cl, "/api/status", &s)
	require.Equal(t, cl.NameServer().ClusterID(), s.ClusterID)
	require.NotNil(t, s.Leader, "a lone nameserver leads its group of one")
	require.Equal(t, "ns1", s.Leader.Name)
	require.True(t, s.Leader.Self)
	require.Equal(t, cl.NameServerAddr, s.Leader.Address)
	require.Positive(t, s.Leader.Term)
	require.False(t, s.SafeMode.On)
	require.Equal(t, statuspage.ChunkserverCount{Live: 3}, s.Chunkservers)
	require.Equal(t, statuspage.LockCount{Locked: 7}, s.Locks)
	require.EqualValues(t, len(sessions), s.Sessions)
	require.Equal(t, statuspage.BlockHealth{}, s.Blocks)
	var capacity int64
	for _, c := range css {
		capacity += c.Capacity
	}
	require.Equal(t, capacity, s.CapacityBytes)

	// The lock of one directory, with its stored history.
	d := lockJSON(t, cl, "/t/b1")
	l, err := a.GetDirLock(ctx, "/t/b1")
	require.NoError(t, err)
	requireAgrees(t, l, d.Lock)
	require.Empty(t, d.History)
	require.NoError(t, b.MkdirAll(ctx, "/t/b9", 0))
	u := lockJSON(t, cl, "/t/b9")
	require.Equal(t, "UNLOCKED", u.State)

	// Every HTML page shows it; none shows a whole session id.
	for path, want := range map[string][]string{
		"/":                      {"/t/a0", "tablet-b", css[0].Address, "leader <b>ns1</b>", "Directory locks"},
		"/locks":                 {"/t/a4", "/t/b1", "LOCKED"},
		"/locks?holder=tablet-a": {"/t/a3"},
		"/lock?path=/t/a0":       {"tablet-a", "never unlocked"},
		"/sessions":              {"tablet-a", "tablet-b", sessions[0].ID[:8]},
		"/chunkservers":          {css[2].Address, "LIVE"},
		"/history":               {"/t/b0", "UNLOCKED", "LOCKED"},
	} {
		code, body := get(t, cl, path)
		require.Equal(t, http.StatusOK, code, path)
		for _, s := range want {
			require.Contains(t, string(body), s, path)
		}
		for _, s := range sessions {
			require.NotContains(t, string(body), s.ID, path)
		}
	}
	for _, path := range []string{"/api/locks", "/api/sessions", "/api/history", "/api/lock?path=/t/a0"} {
		_, body := get(t, cl, path)
		for _, s := range sessions {
			require.NotContains(t, string(body), s.ID, path)
		}
	}

	// The HTML locks page pages as the JSON does.
	_, body := get(t, cl, "/locks?limit=2")
	next := regexp.MustCompile(`href="(\?[^"]*page=[^"]+)">next page`).FindSubmatch(body)
	require.NotNil(t, next, "no next page link in %s", body)
	_, body = get(t, cl, "/locks"+strings.ReplaceAll(string(next[1]), "&amp;", "&"))
	require.Contains(t, string(body), "/t/a2")
	require.NotContains(t, string(body), "/t/a1<")
}

func lockPaths(locks []statuspage.Lock) []string {
	var out []string
	for _, l := range locks {
		out = append(out, l.Path)
	}
	return out
}

// TestBadRequests: a request the page cannot answer gets a clear error
// and its HTTP status, as JSON or as a page.
func TestBadRequests(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Insecure(), testcluster.WithHTTP())
	for path, want := range map[string]struct {
		code int
		msg  string
	}{
		"/api/locks?limit=0":        {400, "limit must be a whole number from 1 to 1000"},
		"/api/locks?limit=abc":      {400, `got \"abc\"`},
		"/api/sessions?limit=5000":  {400, "limit must be"},
		"/api/locks?state=bogus":    {400, `state must be locked or cleaning, got \"bogus\"`},
		"/api/locks?page=garbage":   {400, "bad page token"},
		"/api/locks?prefix=rel":     {400, "INVALID_ARGUMENT"},
		"/api/lock":                 {400, "name a directory"},
		"/api/lock?path=/nope":      {404, "NOT_FOUND"},
		"/api/lock?path=%00":        {400, "INVALID_ARGUMENT"},
		"/api/history?before=x":     {400, "before must be"},
		"/api/chunkservers?page=zz": {400, "bad page token"},
		"/locks?state=bogus":        {400, "state must be locked or cleaning"},
		"/lock?path=/nope":          {404, "NOT_FOUND"},
	} {
		code, body := get(t, cl, path)
		require.Equal(t, want.code, code, "%s: %s", path, body)
		require.Contains(t, string(body), want.msg, path)
	}
	code, _ := get(t, cl, "/nothing-here")
	require.Equal(t, http.StatusNotFound, code)
	resp, err := http.Post("http://"+cl.NameServerHTTPAddr()+"/api/status", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "read-only")
}

// TestLoopbackOnly: without TLS (no identities), the page answers
// loopback clients only, unless the nameserver is started to serve it to
// all; /metrics stays open to scrapers.
func TestLoopbackOnly(t *testing.T) {
	serve := func(h http.Handler, remote, path string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	private := testcluster.Start(t, testcluster.Insecure()).NameServer().HTTPHandler()
	for _, path := range []string{"/", "/locks", "/api/status", "/api/locks"} {
		code, body := serve(private, "192.0.2.7:40000", path)
		require.Equal(t, http.StatusForbidden, code, path)
		require.Contains(t, body, "--status-public")
		for _, local := range []string{"127.0.0.1:40000", "[::1]:40000"} {
			code, _ = serve(private, local, path)
			require.Equal(t, http.StatusOK, code, path)
		}
	}
	code, body := serve(private, "192.0.2.7:40000", "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "bfs_nameserver_sessions")

	public := testcluster.Start(t, testcluster.Insecure(), testcluster.WithNameServerConfig(func(c *nameserver.Config) { c.StatusPublic = true }))
	code, _ = serve(public.NameServer().HTTPHandler(), "192.0.2.7:40000", "/api/status")
	require.Equal(t, http.StatusOK, code)
}

// TestChartsFromSamples: grants and refusals show in the sampled rates
// and are drawn; every metric the page reads is exported.
func TestChartsFromSamples(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Insecure(), testcluster.WithChunkservers(1), testcluster.WithHTTP(), testcluster.WithNameServerConfig(func(c *nameserver.Config) {
		c.TestingKnobs.StatusSampleInterval = 20 * time.Millisecond
	}))
	ctx := context.Background()
	a, b := dialSDK(t, cl, "a"), dialSDK(t, cl, "b")
	require.NoError(t, a.MkdirAll(ctx, "/d", 0))
	var rates statuspage.Samples
	eventually(t, "grants and refusals in the samples", func() bool {
		l, err := a.LockDir(ctx, "/d")
		require.NoError(t, err)
		_, err = b.LockDir(ctx, "/d")
		require.ErrorIs(t, err, sdk.ErrLocked)
		require.NoError(t, l.Unlock(ctx))
		getJSON(t, cl, "/api/samples", &rates)
		var grants, refusals bool
		for _, r := range rates.Rates {
			grants = grants || r.GrantsPerSecond > 0
			refusals = refusals || r.RefusalsPerSecond > 0
		}
		return grants && refusals && len(rates.Rates) >= 3
	})
	require.EqualValues(t, 20, rates.IntervalMs)
	_, body := get(t, cl, "/")
	require.Regexp(t, `<polyline fill="none" stroke="#2a7ab0" stroke-width="2" stroke-dasharray="" points="[0-9.]+,[0-9.]+ [0-9.]+,[0-9.]+`, string(body))
	require.Contains(t, string(body), "Lock grants and refusals per second")
	require.Contains(t, string(body), "Repair copies, bytes per second")

	_, metrics := get(t, cl, "/metrics")
	for _, name := range statuspage.MetricNames() {
		require.Regexp(t, `(?m)^`+name+`(\{| )`, string(metrics), "the page reads %s", name)
	}
}

// TestPageAfterRestart: a restarted nameserver serves its page on the
// same HTTP port with the locks it recovered; the recent transitions are
// the process's own and start empty, the stored history stays.
func TestPageAfterRestart(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Insecure(), testcluster.WithHTTP())
	ctx := context.Background()
	c := dialSDK(t, cl, "op")
	require.NoError(t, c.MkdirAll(ctx, "/d", 0))
	l, err := c.LockDirOperator(ctx, "/d", "ops")
	require.NoError(t, err)
	_, err = c.UnlockDir(ctx, "/d", sdk.Force(), sdk.WaitUnlocked())
	require.NoError(t, err)
	_, err = c.LockDirOperator(ctx, "/d", "ops")
	require.NoError(t, err)
	addr := cl.NameServerHTTPAddr()

	cl.RestartNameServer()
	require.Equal(t, addr, cl.NameServerHTTPAddr())
	var locks statuspage.LockPage
	getJSON(t, cl, "/api/locks", &locks)
	require.Equal(t, []string{"/d"}, lockPaths(locks.Locks))
	require.Equal(t, "operator-"+fmt.Sprint(locks.Locks[0].Epoch), locks.Locks[0].Session, "no secret: shown whole")
	var h statuspage.HistoryPage
	getJSON(t, cl, "/api/history", &h)
	require.Empty(t, h.Transitions)
	d := lockJSON(t, cl, "/d")
	require.Len(t, d.History, 1)
	require.Equal(t, statuspage.HistoryEntry{Holder: "ops", Epoch: l.Epoch, LockedAt: d.History[0].LockedAt,
		UnlockedAt: d.History[0].UnlockedAt, Reason: "force"}, d.History[0])
}

// TestSecurePageAnswersAdminsOnly: over TLS the page and its JSON answer
// an admin certificate, and refuse a client's (and plaintext), whatever
// the address.
func TestSecurePageAnswersAdminsOnly(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithHTTP())
	admin, err := cl.AdminHTTPClient()
	require.NoError(t, err)
	for _, path := range []string{"/", "/api/status", "/locks"} {
		resp, err := admin.Get(cl.URL(cl.NameServerHTTPAddr(), path))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)

		resp, err = cl.HTTPClient().Get(cl.URL(cl.NameServerHTTPAddr(), path))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
		require.Contains(t, string(body), "admins only")
	}
	// The metrics stay open to any client of the cluster (scrapers).
	resp, err := cl.HTTPClient().Get(cl.URL(cl.NameServerHTTPAddr(), "/metrics"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// Plaintext is refused by the TLS port itself.
	resp, err = http.Get("http://" + cl.NameServerHTTPAddr() + "/")
	if err == nil {
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode)
	}
}

// TestFollowerPage: in a group, a follower's page says it follows and
// names the leader; what only the leader knows (the summary's safe mode,
// locks) is not made up from the follower's empty state but refused, 503,
// naming the leader. The leader's page serves as a lone nameserver's does.
func TestFollowerPage(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithHTTP(), testcluster.WithNameServers(3))
	admin, err := cl.AdminHTTPClient()
	require.NoError(t, err)
	leader := cl.LeaderIndex()
	name := fmt.Sprintf("ns%d", leader+1)
	for i, addr := range cl.NameServerHTTPAddrs() {
		for _, path := range []string{"/", "/locks", "/api/locks"} {
			resp, err := admin.Get(cl.URL(addr, path))
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if i == leader {
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s on the leader: %s", path, body)
				require.NotContains(t, string(body), "follows the leader")
				continue
			}
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s on follower ns%d", path, i+1)
			require.Contains(t, string(body), "the leader is "+name, "%s on follower ns%d names the leader", path, i+1)
			if path != "/api/locks" {
				require.Contains(t, string(body), "This nameserver follows the leader, <b>"+name+"</b>")
			}
		}
	}
}
