package sdk

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// GroupMember is one nameserver of the group and what it says of itself.
type GroupMember struct {
	Name, RaftAddress, ClientAddress string
	Voter                            bool
	// Reached is false if the member could not be asked (Err says why);
	// the fields below are its own answer.
	Reached bool
	Err     error
	// Role is leader, follower, nonvoter, candidate or shutdown.
	Role                  string
	Term, Commit, Applied uint64
	// LastContact is how long ago a follower last heard from the leader
	// (-1: never).
	LastContact time.Duration
}

// GroupStatus is the nameserver group as its members describe it.
type GroupStatus struct {
	ClusterID string
	// Leader is the name of the member that says it leads, or, if that
	// member could not be asked (its client address is not published
	// yet, a moment after the group starts), the leader the member asked
	// first knows of from Raft; "" if none.
	Leader  string
	Members []GroupMember
}

// GroupStatus asks one nameserver for the group's members, then each
// member for its own role, term and indexes. A member that cannot be
// reached is listed with Reached false; a group without a leader is
// reported as such, quickly: no call waits for a leader.
func (c *Client) GroupStatus(ctx context.Context) (GroupStatus, error) {
	if err := c.checkOpen(); err != nil {
		return GroupStatus{}, err
	}
	first, err := c.ns.ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	if err != nil {
		return GroupStatus{}, fmt.Errorf("cluster status: %w", transportError(ctx, err))
	}
	st := GroupStatus{ClusterID: first.ClusterId}
	for _, m := range first.Members {
		gm := GroupMember{Name: m.Name, RaftAddress: m.RaftAddress, ClientAddress: m.ClientAddress, Voter: m.Voter}
		var own *bfspb.ClusterStatusResponse
		if m.Name == first.Name {
			own = first
		} else if m.ClientAddress == "" {
			gm.Err = fmt.Errorf("%w: %s has not published its client address", ErrUnavailable, m.Name)
		} else {
			own, gm.Err = c.memberStatus(ctx, m.ClientAddress)
		}
		if own != nil {
			gm.Reached, gm.Role, gm.Term, gm.Commit, gm.Applied = true, own.Role, own.Term, own.CommitIndex, own.AppliedIndex
			gm.LastContact = time.Duration(own.LastContactMs) * time.Millisecond
			if own.LastContactMs < 0 {
				gm.LastContact = -1
			}
			if own.Role == "leader" {
				st.Leader = m.Name
			}
		}
		st.Members = append(st.Members, gm)
	}
	if st.Leader == "" && first.Leader != "" {
		for _, m := range st.Members {
			if m.Name == first.Leader && m.ClientAddress == "" {
				st.Leader = m.Name
			}
		}
	}
	return st, nil
}

// memberStatus asks the member at addr about itself, directly.
func (c *Client) memberStatus(ctx context.Context, addr string) (*bfspb.ClusterStatusResponse, error) {
	conn, err := grpc.NewClient(addr, c.dialOptions...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := bfspb.NewNameServerClient(conn).ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return resp, nil
}

// AddMember adds the nameserver name (started with --join, its peers
// reaching it at raftAddr) to the group: as a nonvoter until it has
// caught up, then as a voter. It returns once it votes.
func (c *Client) AddMember(ctx context.Context, name, raftAddr string) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	resp, err := c.ns.AddMember(ctx, &bfspb.AddMemberRequest{Name: name, RaftAddress: raftAddr})
	if err != nil {
		return fmt.Errorf("add member %s: %w", name, transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return fmt.Errorf("add member %s: %w", name, err)
	}
	return nil
}

// RemoveMember takes the nameserver name out of the group.
func (c *Client) RemoveMember(ctx context.Context, name string) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	resp, err := c.ns.RemoveMember(ctx, &bfspb.RemoveMemberRequest{Name: name})
	if err != nil {
		return fmt.Errorf("remove member %s: %w", name, transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return fmt.Errorf("remove member %s: %w", name, err)
	}
	return nil
}

// TransferLeader has the leader hand leadership over, to the member
// named to ("": the most up-to-date voter).
func (c *Client) TransferLeader(ctx context.Context, to string) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	resp, err := c.ns.TransferLeader(ctx, &bfspb.TransferLeaderRequest{To: to})
	if err != nil {
		return fmt.Errorf("transfer leadership: %w", transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return fmt.Errorf("transfer leadership: %w", err)
	}
	return nil
}
