package nameserver

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestSessionFieldsFound: the requests found to name a session, and the
// answers' fields found to hold session ids, are every one there is (a
// new one shows here, to be looked at, not silently unchecked).
func TestSessionFieldsFound(t *testing.T) {
	var methods []string
	for m := range sessionFields {
		methods = append(methods, m[strings.LastIndexByte(m, '/')+1:])
	}
	slices.Sort(methods)
	require.Equal(t, []string{"AddBlock", "Chmod", "CloseSession", "Create", "DeleteDir", "DeleteFile", "FinishFile",
		"KeepAlive", "ListDirLocks", "LockDir", "Mkdir", "Rename", "SyncBlock", "UnlockDir", "WatchDirLocks"}, methods)

	var fields []string
	for _, p := range sessionIDFields {
		for _, fd := range p.ids {
			fields = append(fields, string(fd.FullName()))
		}
	}
	slices.Sort(fields)
	require.Equal(t, []string{"bfs.DirLock.session_id", "bfs.FileInfo.holder_session", "bfs.FileInfo.writer_session",
		"bfs.OpenSessionResponse.session_id", "bfs.SessionInfo.session_id"}, fields)
	answers := slices.Sorted(maps.Keys(sessionIDFields))
	require.Contains(t, answers, protoreflect.FullName("bfs.DirLockEvent"), "the watch's events")
	require.NotContains(t, answers, protoreflect.FullName("bfs.LockHistoryEntry"))
}

// TestPrivileged: what each privileged request needs, by kind of caller.
func TestPrivileged(t *testing.T) {
	s := &Server{}
	admin := certs.Identity{Kind: certs.KindAdmin, Name: "ops"}
	client := certs.Identity{Kind: certs.KindClient, Name: "tablet"}
	node := certs.Identity{Kind: certs.KindNode, Name: "cs1"}
	for _, tc := range []struct {
		method string
		req    any
		admin  bool // only an admin may
		node   bool // a node may too
	}{
		{bfspb.NameServer_UnlockDir_FullMethodName, &bfspb.UnlockDirRequest{Path: "/d", Force: true}, true, false},
		{bfspb.NameServer_UnlockDir_FullMethodName, &bfspb.UnlockDirRequest{Path: "/d"}, false, false},
		{bfspb.NameServer_LockDir_FullMethodName, &bfspb.LockDirRequest{Path: "/d", Operator: true}, true, false},
		{bfspb.NameServer_LeaveSafeMode_FullMethodName, &bfspb.LeaveSafeModeRequest{}, true, false},
		{bfspb.NameServer_Decommission_FullMethodName, &bfspb.DecommissionRequest{Cancel: true}, true, false},
		{bfspb.NameServer_ListChunkservers_FullMethodName, &bfspb.ListChunkserversRequest{}, true, false},
		{bfspb.NameServer_AddMember_FullMethodName, &bfspb.AddMemberRequest{}, true, false},
		{bfspb.NameServer_RemoveMember_FullMethodName, &bfspb.RemoveMemberRequest{}, true, false},
		{bfspb.NameServer_TransferLeader_FullMethodName, &bfspb.TransferLeaderRequest{}, true, false},
		{bfspb.NameServer_PublishMember_FullMethodName, &bfspb.PublishMemberRequest{}, true, true},
		{bfspb.NameServer_GetSafeMode_FullMethodName, &bfspb.GetSafeModeRequest{}, false, false},
		{bfspb.NameServer_Stat_FullMethodName, &bfspb.StatRequest{Path: "/"}, false, false},
	} {
		_, err := s.check(admin, tc.method, tc.req)
		require.NoError(t, err, "%s by an admin", tc.method)
		_, err = s.check(client, tc.method, tc.req)
		require.Equal(t, tc.admin, err != nil, "%s %v by a client: %v", tc.method, tc.req, err)
		_, err = s.check(node, tc.method, tc.req)
		require.Equal(t, tc.admin && !tc.node, err != nil, "%s by a node: %v", tc.method, err)
		if err != nil {
			require.ErrorIs(t, err, errDenied)
			require.Contains(t, err.Error(), "node/cs1")
			code, _ := statusOf(err)
			require.Equal(t, bfspb.StatusCode_PERMISSION_DENIED, code)
		}
	}
}

// TestSessionOwners: a session is used only by its owner (an admin may
// name it in a filter, not act for it); a record stored before owners
// were recorded may be used by anyone, and its id is shown whole to
// admins only; an answer with an id to hide is copied, never changed.
func TestSessionOwners(t *testing.T) {
	ns, err := namespace.Open(namespace.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer ns.Close()
	id, err := namespace.NewClusterID()
	require.NoError(t, err)
	apply := func(op *bfspb.Command) {
		t.Helper()
		_, err := ns.Apply(ns.AppliedIndex()+1, op)
		require.NoError(t, err)
	}
	apply(&bfspb.Command{Op: &bfspb.Command_Format{Format: &bfspb.FormatCmd{ClusterId: id}}})
	const owned, legacy = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	for sid, owner := range map[string]string{owned: "client/tablet", legacy: ""} {
		apply(&bfspb.Command{Op: &bfspb.Command_OpenSession{OpenSession: &bfspb.OpenSessionCmd{
			Session: &bfspb.SessionRecord{SessionId: sid, Holder: "h", TtlMs: 1000, Owner: owner}}}})
	}
	s := &Server{ns: ns}
	tablet := certs.Identity{Kind: certs.KindClient, Name: "tablet"}
	other := certs.Identity{Kind: certs.KindClient, Name: "other"}
	admin := certs.Identity{Kind: certs.KindAdmin, Name: "ops"}
	keepAlive := bfspb.NameServer_KeepAlive_FullMethodName
	filter := bfspb.NameServer_ListDirLocks_FullMethodName

	_, err = s.check(tablet, keepAlive, &bfspb.KeepAliveRequest{SessionId: owned})
	require.NoError(t, err)
	for _, who := range []certs.Identity{other, admin} {
		_, err = s.check(who, keepAlive, &bfspb.KeepAliveRequest{SessionId: owned})
		require.ErrorIs(t, err, errDenied, "%s", who)
		require.ErrorContains(t, err, "belongs to client/tablet")
		require.NotContains(t, err.Error(), owned, "the refusal repeats the id")
		_, err = s.check(who, keepAlive, &bfspb.KeepAliveRequest{SessionId: legacy})
		require.NoError(t, err, "a record without owner, for %s", who)
	}
	_, err = s.check(other, filter, &bfspb.ListDirLocksRequest{SessionId: owned})
	require.ErrorIs(t, err, errDenied)
	_, err = s.check(admin, filter, &bfspb.ListDirLocksRequest{SessionId: owned})
	require.NoError(t, err)
	_, err = s.check(other, keepAlive, &bfspb.KeepAliveRequest{SessionId: "gone"})
	require.NoError(t, err, "an unknown session is the handler's to answer (expired)")

	resp := &bfspb.ListSessionsResponse{Sessions: []*bfspb.SessionInfo{{SessionId: owned}, {SessionId: legacy}}}
	shown := func(who certs.Identity) []string {
		out := s.conceal(who, "", resp).(*bfspb.ListSessionsResponse)
		return []string{out.Sessions[0].SessionId, out.Sessions[1].SessionId}
	}
	require.Equal(t, []string{owned, "fedcba98…"}, shown(tablet))
	require.Equal(t, []string{"01234567…", "fedcba98…"}, shown(other))
	require.Equal(t, []string{owned, legacy}, shown(admin))
	require.Equal(t, owned, resp.Sessions[0].SessionId, "the answer itself changed")
	require.Same(t, resp, s.conceal(admin, "", resp))
	ev := &bfspb.DirLockEvent{Lock: &bfspb.DirLock{SessionId: "operator-7"}}
	require.Same(t, ev, s.conceal(other, "", ev), "an operator lock's session is no secret")
}
