package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestMemberTable: members are added, have their addresses replaced and
// are removed; no two share a name or an address; a refused change
// changes nothing; the table survives a reopen.
func TestMemberTable(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	require.Empty(t, s.Members())
	require.NoError(t, member(s, "n2", "r2:1", "c2:1"))
	require.NoError(t, member(s, "n1", "r1:1", "c1:1"))
	require.Equal(t, []string{"n1=r1:1,c1:1", "n2=r2:1,c2:1"}, memberTable(s), "by name")
	m, ok := s.Member("n2")
	require.True(t, ok)
	require.True(t, proto.Equal(&bfspb.Member{Name: "n2", RaftAddress: "r2:1", ClientAddress: "c2:1"}, m))
	_, ok = s.Member("n9")
	require.False(t, ok)

	require.NoError(t, member(s, "n1", "r1:1", "c1:1"), "the same again (a replayed command)")
	require.NoError(t, member(s, "n1", "r1:2", "c1:2"), "new addresses")
	require.NoError(t, member(s, "n1", "r1:1", "c1:2"), "back to an address it had")

	before, applied := dump(t, s), s.AppliedIndex()
	for _, tc := range []struct {
		name, raft, client string
		want               error
	}{
		{"n3", "r2:1", "c3:1", ErrExists}, // n2's raft address
		{"n3", "r3:1", "c2:1", ErrExists}, // n2's client address
		{"n2", "r1:1", "c2:1", ErrExists}, // n2 taking n1's raft address
		{"n2", "r2:1", "c1:2", ErrExists}, // n2 taking n1's client address
		{"", "r9:1", "c9:1", ErrInvalid},  // no name
		{"n4", "", "c4:1", ErrInvalid},    // no raft address
		{"n4", "r4:1", "", ErrInvalid},    // no client address
	} {
		err := member(s, tc.name, tc.raft, tc.client)
		require.ErrorIs(t, err, tc.want, "%+v", tc)
	}
	_, err := s.apply(cmdOf(1, &bfspb.MemberCmd{}))
	require.ErrorIs(t, err, ErrInvalid, "a member command without a member")
	require.Equal(t, applied, s.AppliedIndex())
	require.Empty(t, diffState(before, dump(t, s)), "a refused member command changed the state")
	require.Equal(t, []string{"n1=r1:1,c1:2", "n2=r2:1,c2:1"}, memberTable(s))

	// An address a member gave up is free for another.
	require.NoError(t, member(s, "n2", "r2:2", "c2:2"))
	require.NoError(t, member(s, "n3", "r2:1", "c2:1"))
	require.NoError(t, member(s, "n4", "r4:1", "c4:1"))
	require.NoError(t, removeMember(s, "n4"))
	require.NoError(t, removeMember(s, "n4"), "removing a member twice (a replayed command)")
	require.NoError(t, member(s, "n5", "r4:1", "c4:1"), "the addresses of a removed member are free")
	want := []string{"n1=r1:1,c1:2", "n2=r2:2,c2:2", "n3=r2:1,c2:1", "n5=r4:1,c4:1"}
	require.Equal(t, want, memberTable(s))
	require.NoError(t, s.Close())

	s = open(t, dir)
	require.Equal(t, want, memberTable(s), "after a reopen")
	m, ok = s.Member("n3")
	require.True(t, ok)
	require.Equal(t, "c2:1", m.ClientAddress)
	_, ok = s.Member("n4")
	require.False(t, ok)
}
