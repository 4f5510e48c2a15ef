package nameserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// theft is a victim (the SDK, as the sandbox's client "bfs") holding a
// lock on /v, and a thief, another client identity, that has learnt the
// victim's session id: what every attack below starts from.
type theft struct {
	cl      *testcluster.Cluster
	victim  *sdk.Client
	lock    *sdk.Lock
	session string
	thief   bfspb.NameServerClient
	ctx     context.Context
}

func newTheft(t *testing.T, opts ...testcluster.Option) *theft {
	t.Helper()
	cl := testcluster.Start(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	victim, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient(), sdk.WithHolder("victim"))
	require.NoError(t, err)
	t.Cleanup(func() { victim.Close() })
	require.NoError(t, victim.MkdirAll(ctx, "/v/d", 0o755))
	require.NoError(t, victim.Touch(ctx, "/v/f"))
	lock, err := victim.LockDir(ctx, "/v")
	require.NoError(t, err)
	thief := bfspb.NewNameServerClient(cl.DialAs(cl.NameServerAddr, cl.NewClient("mallory", false)))
	return &theft{cl: cl, victim: victim, lock: lock, session: lock.SessionID(), thief: thief, ctx: ctx}
}

// denied asserts that resp was refused PERMISSION_DENIED, naming the
// caller.
func denied(t *testing.T, what string, resp interface {
	GetStatus() bfspb.StatusCode
	GetMessage() string
}, err error) {
	t.Helper()
	require.NoError(t, err, what)
	require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, resp.GetStatus(), "%s: %s", what, resp.GetMessage())
	require.Contains(t, resp.GetMessage(), "client/mallory", what)
}

// TestStolenSessionMutations (attack a): another identity naming the
// victim's session is refused every mutation in the victim's locked
// directory, and every other request that would act for the session.
func TestStolenSessionMutations(t *testing.T) {
	a := newTheft(t)
	ctx, ns, sid := a.ctx, a.thief, a.session
	r1, err := ns.Create(ctx, &bfspb.CreateRequest{Path: "/v/evil", SessionId: sid})
	denied(t, "create", r1, err)
	r2, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: "/v/evil", SessionId: sid})
	denied(t, "mkdir", r2, err)
	r3, err := ns.Rename(ctx, &bfspb.RenameRequest{Src: "/v/f", Dst: "/v/g", SessionId: sid})
	denied(t, "rename", r3, err)
	r4, err := ns.DeleteFile(ctx, &bfspb.DeleteFileRequest{Path: "/v/f", SessionId: sid})
	denied(t, "delete file", r4, err)
	r5, err := ns.DeleteDir(ctx, &bfspb.DeleteDirRequest{Path: "/v/d", SessionId: sid})
	denied(t, "delete dir", r5, err)
	r6, err := ns.Chmod(ctx, &bfspb.ChmodRequest{Path: "/v/f", Mode: 0o600, SessionId: sid})
	denied(t, "chmod", r6, err)
	r7, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/other", SessionId: sid})
	denied(t, "lock", r7, err)
	r8, err := ns.AddBlock(ctx, &bfspb.AddBlockRequest{Path: "/v/f", SessionId: sid})
	denied(t, "add block", r8, err)
	r9, err := ns.SyncBlock(ctx, &bfspb.SyncBlockRequest{Path: "/v/f", SessionId: sid})
	denied(t, "sync block", r9, err)
	r10, err := ns.FinishFile(ctx, &bfspb.FinishFileRequest{Path: "/v/f", SessionId: sid})
	denied(t, "finish file", r10, err)
	r11, err := ns.ListDirLocks(ctx, &bfspb.ListDirLocksRequest{SessionId: sid})
	denied(t, "list the session's locks", r11, err)

	// Nothing changed.
	infos, err := a.victim.List(ctx, "/v")
	require.NoError(t, err)
	require.Len(t, infos, 2)
	// The victim's own mutations go on.
	require.NoError(t, a.victim.Mkdir(ctx, "/v/mine", 0o755))
}

// TestStolenSessionKeepAlive (attack b): another identity cannot renew
// the victim's session.
func TestStolenSessionKeepAlive(t *testing.T) {
	a := newTheft(t)
	resp, err := a.thief.KeepAlive(a.ctx, &bfspb.KeepAliveRequest{SessionId: a.session})
	denied(t, "keep-alive", resp, err)
	require.Zero(t, resp.TtlMs)
}

// TestStolenSessionUnlock (attack c): another identity cannot unlock the
// victim's lock in the victim's name; the lock stays.
func TestStolenSessionUnlock(t *testing.T) {
	a := newTheft(t)
	resp, err := a.thief.UnlockDir(a.ctx, &bfspb.UnlockDirRequest{Path: "/v", SessionId: a.session})
	denied(t, "unlock", resp, err)
	d, err := a.victim.GetDirLock(a.ctx, "/v")
	require.NoError(t, err)
	require.Equal(t, sdk.Locked, d.Status)
	require.Equal(t, a.lock.Epoch(), d.Epoch)
	require.NoError(t, a.lock.Err())
}

// TestStolenSessionClose (attack d): another identity cannot close the
// victim's session; the session and its lock live on.
func TestStolenSessionClose(t *testing.T) {
	a := newTheft(t)
	resp, err := a.thief.CloseSession(a.ctx, &bfspb.CloseSessionRequest{SessionId: a.session})
	denied(t, "close session", resp, err)
	s, err := a.victim.Session(a.ctx)
	require.NoError(t, err)
	require.Equal(t, a.session, s.ID(), "the victim's session was replaced")
	require.NoError(t, s.Err())
	require.NoError(t, a.lock.Err())
	require.NoError(t, a.victim.Mkdir(a.ctx, "/v/still-mine", 0o755))
}

// TestStolenSessionWatch: another identity cannot watch the ends of the
// victim's locks.
func TestStolenSessionWatch(t *testing.T) {
	a := newTheft(t)
	stream, err := a.thief.WatchDirLocks(a.ctx, &bfspb.WatchDirLocksRequest{SessionId: a.session})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Contains(t, err.Error(), "client/mallory")
}

// TestForceAndOperatorLockNeedAdmin (attack f): a client that is not an
// admin can neither force a lock open nor take an operator lock; an
// admin can.
func TestForceAndOperatorLockNeedAdmin(t *testing.T) {
	a := newTheft(t)
	ctx := a.ctx
	client := nameServerClient(a.cl) // the sandbox's client "bfs", the victim's own identity
	for _, ns := range []bfspb.NameServerClient{client, a.thief} {
		u, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/v", Force: true})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, u.Status, u.Message)
		require.Contains(t, u.Message, "admin")
		l, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: "/op", Operator: true, Holder: "ops"})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, l.Status, l.Message)
	}
	require.NoError(t, a.lock.Err(), "the lock was forced open")
	require.NoError(t, a.victim.Mkdir(ctx, "/op", 0o755))

	admin := bfspb.NewNameServerClient(a.cl.DialAs(a.cl.NameServerAddr, certs.AdminUser))
	l, err := admin.LockDir(ctx, &bfspb.LockDirRequest{Path: "/op", Operator: true, Holder: "ops"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, l.Status, l.Message)
	u, err := admin.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/v", Force: true})
	require.NoError(t, err)
	require.Contains(t, []bfspb.StatusCode{bfspb.StatusCode_CLEANING, bfspb.StatusCode_UNLOCKED}, u.Status, u.Message)
	<-a.lock.Done()
}

// TestSafeModeAndDecommissionNeedAdmin (attack g): leaving safe mode and
// starting or cancelling a decommission need an admin; chunkservers
// (nodes) are no admins either.
func TestSafeModeAndDecommissionNeedAdmin(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	ctx := context.Background()
	addr := cl.ChunkserverAddrs()[0]
	for _, ns := range []bfspb.NameServerClient{nameServerClient(cl), asNode(t, cl)} {
		l, err := ns.LeaveSafeMode(ctx, &bfspb.LeaveSafeModeRequest{})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, l.Status, l.Message)
		require.Contains(t, l.Message, "admin")
		for _, cancel := range []bool{false, true} {
			d, err := ns.Decommission(ctx, &bfspb.DecommissionRequest{Addresses: []string{addr}, Cancel: cancel})
			require.NoError(t, err)
			require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, d.Status, d.Message)
		}
		r, err := ns.ListChunkservers(ctx, &bfspb.ListChunkserversRequest{})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, r.Status, r.Message)
	}
	admin, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer admin.Close()
	servers, err := admin.Chunkservers(ctx)
	require.NoError(t, err)
	require.Len(t, servers, 1)
	require.False(t, servers[0].Draining, "a refused decommission changed something")
	require.NoError(t, admin.LeaveSafeMode(ctx))
}

// asNode is a raw client presenting the cluster's node certificate, as a
// chunkserver does.
func asNode(t *testing.T, cl *testcluster.Cluster) bfspb.NameServerClient {
	t.Helper()
	return bfspb.NewNameServerClient(cl.DialNode(cl.NameServerAddr))
}

// TestMembershipNeedsAdmin (attack h): adding, removing a member or
// moving leadership needs an admin; the group is unchanged.
func TestMembershipNeedsAdmin(t *testing.T) {
	cl := testcluster.Start(t)
	ctx := context.Background()
	ns := nameServerClient(cl)
	add, err := ns.AddMember(ctx, &bfspb.AddMemberRequest{Name: "evil", RaftAddress: "127.0.0.1:1"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, add.Status, add.Message)
	require.Contains(t, add.Message, "client/bfs")
	before, err := ns.ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	require.NoError(t, err)
	rm, err := ns.RemoveMember(ctx, &bfspb.RemoveMemberRequest{Name: before.Name})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, rm.Status, rm.Message)
	tr, err := ns.TransferLeader(ctx, &bfspb.TransferLeaderRequest{To: "nobody"})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, tr.Status, tr.Message)
	st, err := ns.ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	require.NoError(t, err)
	require.Len(t, st.Members, 1)
	require.Equal(t, "leader", st.Role)
}

// TestSessionIDsHidden (attack i): another identity sees a prefix of the
// victim's session id wherever the nameserver shows one (a lock, a
// listing, a watch event, the sessions, a file open for write), never
// the id; the owner and an admin see it whole.
func TestSessionIDsHidden(t *testing.T) {
	a := newTheft(t)
	ctx, sid := a.ctx, a.session
	w, err := a.victim.Create(ctx, "/v/open")
	require.NoError(t, err)
	defer w.Close()
	watch, err := a.thief.WatchDirLocks(ctx, &bfspb.WatchDirLocksRequest{Prefix: "/"})
	require.NoError(t, err)
	_, err = watch.Header()
	require.NoError(t, err)
	nested, err := a.victim.LockDir(ctx, "/v/d")
	require.NoError(t, err)
	defer nested.Unlock(ctx)

	shown := map[string]string{}
	gl, err := a.thief.GetDirLock(ctx, &bfspb.GetDirLockRequest{Path: "/v"})
	require.NoError(t, err)
	shown["GetDirLock"] = gl.GetLock().GetSessionId()
	ll, err := a.thief.ListDirLocks(ctx, &bfspb.ListDirLocksRequest{Prefix: "/v"})
	require.NoError(t, err)
	require.Len(t, ll.Locks, 2)
	shown["ListDirLocks"] = ll.Locks[0].SessionId
	ev, err := watch.Recv()
	require.NoError(t, err)
	require.Equal(t, "/v/d", ev.Lock.Path)
	shown["WatchDirLocks"] = ev.Lock.SessionId
	ls, err := a.thief.ListSessions(ctx, &bfspb.ListSessionsRequest{Holder: "victim"})
	require.NoError(t, err)
	require.Len(t, ls.Sessions, 1)
	shown["ListSessions"] = ls.Sessions[0].SessionId
	st, err := a.thief.Stat(ctx, &bfspb.StatRequest{Path: "/v/open"})
	require.NoError(t, err)
	shown["Stat writer"] = st.Info.WriterSession
	st, err = a.thief.Stat(ctx, &bfspb.StatRequest{Path: "/v"})
	require.NoError(t, err)
	shown["Stat holder"] = st.Info.HolderSession
	list, err := a.thief.List(ctx, &bfspb.ListRequest{Path: "/v"})
	require.NoError(t, err)
	for _, e := range list.Entries {
		if e.Name == "open" {
			shown["List writer"] = e.WriterSession
		}
	}
	mine, err := a.thief.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "mallory", TtlMs: 10000})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, mine.Status, mine.Message)
	lk, err := a.thief.LockDir(ctx, &bfspb.LockDirRequest{Path: "/v/d", SessionId: mine.SessionId})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_LOCKED, lk.Status, "LOCKED names the holder")
	shown["LockDir conflict"] = lk.GetLock().GetSessionId()
	for what, got := range shown {
		require.Equal(t, sid[:8]+"…", got, "%s shows the victim's session to another identity", what)
	}

	// The owner and an admin see it whole.
	own := nameServerClient(a.cl)
	gl, err = own.GetDirLock(ctx, &bfspb.GetDirLockRequest{Path: "/v"})
	require.NoError(t, err)
	require.Equal(t, sid, gl.Lock.SessionId)
	admin := bfspb.NewNameServerClient(a.cl.DialAs(a.cl.NameServerAddr, certs.AdminUser))
	ls, err = admin.ListSessions(ctx, &bfspb.ListSessionsRequest{Holder: "victim"})
	require.NoError(t, err)
	require.Equal(t, sid, ls.Sessions[0].SessionId)
	st, err = admin.Stat(ctx, &bfspb.StatRequest{Path: "/v/open"})
	require.NoError(t, err)
	require.Equal(t, sid, st.Info.WriterSession)
}

// TestStatusPageHidesSessions (attack i, the status page): the page's
// JSON answers admins only, and shows them a prefix of each session id.
func TestStatusPageHidesSessions(t *testing.T) {
	a := newTheft(t, testcluster.WithHTTP())
	url := a.cl.URL(a.cl.NameServerHTTPAddr(), "/api/sessions")
	hc := a.cl.HTTPClient() // the client "bfs": the victim's own identity, no admin
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	adm, err := a.cl.AdminHTTPClient()
	require.NoError(t, err)
	defer adm.CloseIdleConnections()
	for _, path := range []string{"/api/sessions", "/api/locks", "/api/lock?path=/v"} {
		resp, err := adm.Get(a.cl.URL(a.cl.NameServerHTTPAddr(), path))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.True(t, json.Valid(body))
		require.NotContains(t, string(body), a.session, path)
		require.Contains(t, string(body), a.session[:8], path)
	}
}
