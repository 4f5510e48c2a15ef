package namespace

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// The member table: the nameservers of the group, by name, with the
// addresses their peers and their clients reach them at. It is state
// like any other, changed by MemberCmd, so every replica names the same
// leader address to its clients.

func memberKey(name string) []byte { return append([]byte{prefixMember}, name...) }

// applyMember records (or removes) a member. A name or an address that
// another member has is refused: two members never share either.
func applyMember(st *step, c *bfspb.MemberCmd) (*Result, error) {
	m := c.GetMember()
	if m.GetName() == "" {
		return nil, fmt.Errorf("%w: member without a name", ErrInvalid)
	}
	members, err := loadMembers(st.r)
	if err != nil {
		return nil, err
	}
	rest := slices.DeleteFunc(members, func(o *bfspb.Member) bool { return o.Name == m.Name })
	if c.Remove {
		st.members = rest
		return &Result{}, st.b.Delete(memberKey(m.Name), nil)
	}
	if m.RaftAddress == "" || m.ClientAddress == "" {
		return nil, fmt.Errorf("%w: member %q needs a raft and a client address", ErrInvalid, m.Name)
	}
	for _, o := range rest {
		if o.RaftAddress == m.RaftAddress || o.ClientAddress == m.ClientAddress {
			return nil, fmt.Errorf("%w: member %q has an address of member %q (%s, %s)", ErrExists, m.Name, o.Name, o.RaftAddress, o.ClientAddress)
		}
	}
	v, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	st.members = sortMembers(append(rest, proto.Clone(m).(*bfspb.Member)))
	return &Result{}, st.b.Set(memberKey(m.Name), v, nil)
}

func loadMembers(r pebble.Reader) ([]*bfspb.Member, error) {
	lower, upper := prefixBounds(prefixMember)
	var out []*bfspb.Member
	err := scanKeys(r, lower, upper, func(k, v []byte) error {
		m := &bfspb.Member{}
		if err := proto.Unmarshal(v, m); err != nil {
			return fmt.Errorf("namespace: corrupt member record %x: %w", k, err)
		}
		out = append(out, m)
		return nil
	})
	return sortMembers(out), err
}

func sortMembers(ms []*bfspb.Member) []*bfspb.Member {
	slices.SortFunc(ms, func(a, b *bfspb.Member) int { return cmp.Compare(a.Name, b.Name) })
	return ms
}

func (s *Store) setMembers(ms []*bfspb.Member) { s.members.Store(&ms) }

// Members returns the member table, by name. The members are shared:
// callers must not change them.
func (s *Store) Members() []*bfspb.Member {
	return slices.Clone(*s.members.Load())
}

// Member returns the member named name.
func (s *Store) Member(name string) (*bfspb.Member, bool) {
	for _, m := range *s.members.Load() {
		if m.Name == name {
			return m, true
		}
	}
	return nil, false
}
