package bfscmd

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/nameserver/replica"
	"github.com/bfs-go/bfs/sdk"
)

// groupCommand is `bfs cluster`: the nameserver group.
func (e *env) groupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show and change the nameserver group (status, add, remove, transfer)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("cluster: say status, add, remove or transfer")
		},
	}
	cmd.AddCommand(e.groupStatusCommand(), e.groupAddCommand(), e.groupRemoveCommand(), e.groupTransferCommand())
	return cmd
}

func (e *env) groupStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Each nameserver of the group: name, addresses, role, term, commit and applied index",
		Long: `Asks one nameserver for the group's members, then each member about
itself. Exits 1 if no member leads (an election, or the group has lost its
majority: the members it cannot reach are shown).`,
		Args: cobra.NoArgs,
	}
	out := outputFlag(cmd)
	cmd.RunE = e.withAdmin(func(ctx context.Context, c *sdk.Client, _ []string) error {
		st, err := c.GroupStatus(ctx)
		if err != nil {
			return err
		}
		if *out == outputJSON {
			if err := writeJSON(e.stdout, groupJSON(st)); err != nil {
				return err
			}
		} else {
			e.printGroup(st)
		}
		if st.Leader == "" {
			return fmt.Errorf("%w: no nameserver of the group leads", sdk.ErrUnavailable)
		}
		return nil
	})
	return cmd
}

func (e *env) printGroup(st sdk.GroupStatus) {
	leader := st.Leader
	if leader == "" {
		leader = "none (an election, or no majority of the voters is reachable)"
	}
	fmt.Fprintf(e.stdout, "cluster %s, leader %s\n", st.ClusterID, printable.String(leader))
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRAFT ADDRESS\tCLIENT ADDRESS\tROLE\tTERM\tCOMMIT\tAPPLIED\tLAST CONTACT")
	for _, m := range st.Members {
		role, term, commit, applied, contact := "unreachable", "-", "-", "-", "-"
		if m.Reached {
			role = m.Role
			term, commit, applied = fmt.Sprint(m.Term), fmt.Sprint(m.Commit), fmt.Sprint(m.Applied)
			switch {
			case m.LastContact == 0:
				contact = "-"
			case m.LastContact < 0:
				contact = "never"
			default:
				contact = m.LastContact.Round(1e6).String() + " ago"
			}
		}
		if !m.Voter && m.Reached && role == "follower" {
			role = "nonvoter"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable.String(m.Name), m.RaftAddress,
			orDash(m.ClientAddress), role, term, commit, applied, contact)
	}
	tw.Flush()
	for _, m := range st.Members {
		if !m.Reached && m.Err != nil {
			fmt.Fprintf(e.stdout, "%s: %s\n", printable.String(m.Name), printable.String(m.Err.Error()))
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupMemberJSON is one member in `bfs cluster status -o json`.
type groupMemberJSON struct {
	Name          string `json:"name"`
	RaftAddress   string `json:"raft_address"`
	ClientAddress string `json:"client_address,omitempty"`
	Voter         bool   `json:"voter"`
	Reachable     bool   `json:"reachable"`
	Error         string `json:"error,omitempty"`
	Role          string `json:"role,omitempty"`
	Term          uint64 `json:"term"`
	CommitIndex   uint64 `json:"commit_index"`
	AppliedIndex  uint64 `json:"applied_index"`
}

func groupJSON(st sdk.GroupStatus) any {
	members := make([]groupMemberJSON, 0, len(st.Members))
	for _, m := range st.Members {
		j := groupMemberJSON{Name: m.Name, RaftAddress: m.RaftAddress, ClientAddress: m.ClientAddress, Voter: m.Voter,
			Reachable: m.Reached, Role: m.Role, Term: m.Term, CommitIndex: m.Commit, AppliedIndex: m.Applied}
		if m.Err != nil {
			j.Error = m.Err.Error()
		}
		members = append(members, j)
	}
	return struct {
		ClusterID string            `json:"cluster_id"`
		Leader    string            `json:"leader"`
		Members   []groupMemberJSON `json:"members"`
	}{st.ClusterID, st.Leader, members}
}

func (e *env) groupAddCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "add NAME RAFT_ADDRESS",
		Short: "Add a nameserver (started with --join) to the group: a nonvoter until it catches up, then a voter",
		Args:  cobra.ExactArgs(2),
		RunE: e.withAdmin(func(ctx context.Context, c *sdk.Client, args []string) error {
			if err := c.AddMember(ctx, args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s (%s) is a voting member of the group\n", printable.String(args[0]), args[1])
			return nil
		}),
	}
}

func (e *env) groupRemoveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Take a nameserver out of the group (not the leader: transfer leadership first)",
		Args:  cobra.ExactArgs(1),
		RunE: e.withAdmin(func(ctx context.Context, c *sdk.Client, args []string) error {
			if err := c.RemoveMember(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s removed from the group\n", printable.String(args[0]))
			return nil
		}),
	}
}

func (e *env) groupTransferCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "transfer [NAME]",
		Short: "Have the leader hand leadership over (to NAME, or to the most up-to-date voter)",
		Args:  cobra.MaximumNArgs(1),
		RunE: e.withAdmin(func(ctx context.Context, c *sdk.Client, args []string) error {
			to := ""
			if len(args) > 0 {
				to = args[0]
			}
			if err := c.TransferLeader(ctx, to); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, "leadership handed over")
			return nil
		}),
	}
}

// parseInitialCluster reads --initial-cluster: NAME=ADDRESS,NAME=ADDRESS.
func parseInitialCluster(s string) ([]replica.Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var peers []replica.Peer
	for _, part := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || addr == "" {
			return nil, usagef("--initial-cluster: %q is not NAME=ADDRESS", part)
		}
		peers = append(peers, replica.Peer{Name: name, Address: addr})
	}
	return peers, nil
}
