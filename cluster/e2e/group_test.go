package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/cluster/faultnet"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/nsgroup"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// group is a nameserver group of three `bfs nameserver` processes and
// chunkservers as processes, each with its data under one temporary
// folder. Every member's Raft port sits behind a faultnet proxy (the
// member advertises the proxy with --raft-advertise, and --initial-cluster
// names the proxies), so a test can cut or black-hole the Raft link
// between two members while clients and chunkservers still reach both.
// Chunkservers, clients and tools are given the three client addresses.
// Any member can be killed (SIGKILL) and restarted on its data and
// addresses.
type group struct {
	t   *testing.T
	dir string
	net *faultnet.Net
	// names are the members' --id; raftAddrs where they listen for their
	// peers, fronts the proxies their peers dial; nsAddrs their client
	// addresses. All stay the same across restarts.
	names, raftAddrs, fronts, nsAddrs []string
	// ns are the member processes, nil for one that is down.
	ns []*process
	// nsFlags are extra flags of every member; nsExtra of one, by index,
	// for its next start only.
	nsFlags []string
	nsExtra map[int][]string
	cs      []*process
	csAddrs []string
	csFlags []string
	// csFronts, when the group was started withChunkserverProxies, are
	// the proxies in front of the chunkservers (their advertised
	// addresses).
	csFronts []*holdProxy
	probes   int
	// initial is --initial-cluster of the founding members; joined marks
	// the members started with --join instead.
	initial string
	joined  map[int]bool
}

// groupOption adjusts a group before it starts.
type groupOption func(*group)

// withNameServerFlags adds flags to every member.
func withNameServerFlags(flags ...string) groupOption {
	return func(g *group) { g.nsFlags = append(g.nsFlags, flags...) }
}

// withChunkserverFlags adds flags to every chunkserver.
func withChunkserverFlags(flags ...string) groupOption {
	return func(g *group) { g.csFlags = append(g.csFlags, flags...) }
}

// withChunkserverProxies puts a holdProxy in front of every chunkserver:
// the chunkserver advertises it, so the nameservers and clients reach it
// through the proxy.
func withChunkserverProxies() groupOption {
	return func(g *group) { g.csFronts = []*holdProxy{} }
}

// groupSize is the number of nameservers of a group.
const groupSize = 3

// startGroup starts a group of three nameservers and n chunkservers, and
// waits until a member leads and every chunkserver has registered.
func startGroup(t *testing.T, n int, opts ...groupOption) *group {
	t.Helper()
	g := &group{t: t, dir: t.TempDir(), net: faultnet.New(), nsExtra: map[int][]string{}, joined: map[int]bool{}}
	t.Cleanup(g.net.Close)
	for _, o := range opts {
		o(g)
	}
	var initial []string
	for i := range groupSize {
		g.addName(i)
		initial = append(initial, g.names[i]+"="+g.fronts[i])
	}
	g.initial = strings.Join(initial, ",")
	for i := range groupSize {
		g.ns[i] = g.startMember(i, "127.0.0.1:0")
		g.nsAddrs[i] = g.ns[i].addr
	}
	g.waitLeader(-1)
	g.cs = make([]*process, n)
	g.csAddrs = make([]string, n)
	for i := range n {
		g.cs[i] = g.startChunkserver(i, "127.0.0.1:0")
		g.csAddrs[i] = g.cs[i].addr
	}
	g.waitChunkservers()
	return g
}

// addName gives member i its name, Raft address and proxy.
func (g *group) addName(i int) {
	g.t.Helper()
	name := fmt.Sprintf("ns%d", i+1)
	raft := freeAddr(g.t)
	front, err := g.net.Front(name, raft)
	if err != nil {
		g.t.Fatal(err)
	}
	g.names = append(g.names, name)
	g.raftAddrs = append(g.raftAddrs, raft)
	g.fronts = append(g.fronts, front)
	g.ns = append(g.ns, nil)
	g.nsAddrs = append(g.nsAddrs, "")
}

// join starts a new nameserver with --join (it bootstraps nothing: bfs
// cluster add makes it a member) and returns its index.
func (g *group) join() int {
	g.t.Helper()
	i := len(g.names)
	g.addName(i)
	g.joined[i] = true
	g.ns[i] = g.startMember(i, "127.0.0.1:0")
	g.nsAddrs[i] = g.ns[i].addr
	return i
}

// list is the group's client addresses as the tools take them.
func (g *group) list() string {
	var addrs []string
	for _, a := range g.nsAddrs {
		if a != "" {
			addrs = append(addrs, a)
		}
	}
	return strings.Join(addrs, ",")
}

// nameservers is the --nameserver of the tablet servers.
func (g *group) nameservers() string { return g.list() }

func (g *group) startMember(i int, addr string) *process {
	g.t.Helper()
	args := []string{"nameserver", "--id", g.names[i], "--data", filepath.Join(g.dir, g.names[i]), "--listen", addr,
		"--metrics", "", "--raft-listen", g.raftAddrs[i], "--raft-advertise", g.fronts[i]}
	if g.joined[i] {
		args = append(args, "--join")
	} else {
		args = append(args, "--initial-cluster", g.initial)
	}
	args = slices.Concat(args, g.nsFlags, g.nsExtra[i])
	delete(g.nsExtra, i)
	p := startDaemon(g.t, args...)
	p.name = g.names[i]
	return p
}

// kill kills member i with SIGKILL.
func (g *group) kill(i int) {
	g.ns[i].kill()
	g.ns[i] = nil
}

// restart starts member i again on its data and addresses.
func (g *group) restart(i int) { g.ns[i] = g.startMember(i, g.nsAddrs[i]) }

// up returns the members running.
func (g *group) up() []int {
	var out []int
	for i, p := range g.ns {
		if p != nil {
			out = append(out, i)
		}
	}
	return out
}

func (g *group) startChunkserver(i int, addr string) *process {
	g.t.Helper()
	args := []string{"chunkserver", "--data", filepath.Join(g.dir, fmt.Sprintf("chunkserver-%d", i)),
		"--listen", addr, "--metrics", "", "--nameserver", g.list(), "--certs-dir", csCertsDir}
	if g.csFronts != nil {
		if len(g.csFronts) <= i {
			g.csFronts = append(g.csFronts, startHoldProxy(g.t))
		}
		if addr == "127.0.0.1:0" {
			addr = freeAddr(g.t)
			args[4] = addr
		}
		g.csFronts[i].target.Store(&addr)
		args = append(args, "--advertise", g.csFronts[i].addr())
	}
	return startDaemon(g.t, slices.Concat(args, g.csFlags)...)
}

// memberStatus asks member i about itself, directly, within a second.
func (g *group) memberStatus(i int) (*bfspb.ClusterStatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return dialNameServer(g.t, g.nsAddrs[i]).ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
}

// leader returns the member that says it leads in the newest term any
// running member reports, and that term; -1 if none does.
func (g *group) leader() (int, uint64) {
	leader, term, top := -1, uint64(0), uint64(0)
	for _, i := range g.up() {
		st, err := g.memberStatus(i)
		if err != nil {
			continue
		}
		top = max(top, st.Term)
		if st.Role == "leader" && st.Term >= term {
			leader, term = i, st.Term
		}
	}
	if leader >= 0 && term < top {
		return -1, 0 // a newer term is under way
	}
	return leader, term
}

// waitLeader waits until a running member other than not leads, and
// returns it.
func (g *group) waitLeader(not int) int {
	g.t.Helper()
	var l int
	waitFor(g.t, 60*time.Second, "a leader", func() bool {
		l, _ = g.leader()
		return l >= 0 && l != not
	})
	return l
}

// waitFollowing waits until member i follows the leader in its term and
// has applied what the leader had committed when the wait began: it is
// a member a new majority can count on.
func (g *group) waitFollowing(i int) {
	g.t.Helper()
	waitFor(g.t, 60*time.Second, g.names[i]+" to catch up with the leader", func() bool {
		l, term := g.leader()
		if l < 0 || l == i {
			return l == i
		}
		lst, err := g.memberStatus(l)
		if err != nil {
			return false
		}
		st, err := g.memberStatus(i)
		return err == nil && st.Term == term && st.Role == "follower" && st.AppliedIndex >= lst.CommitIndex
	})
}

// nsConn is a raw client of the group that follows its leader, closed
// at the end of the test.
func (g *group) nsConn() bfspb.NameServerClient {
	g.t.Helper()
	conn, err := nsgroup.New(nsgroup.Config{Addrs: strings.Split(g.list(), ","),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(certs.TransportCredentials(clientCreds))},
		Patience:    30 * time.Second})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { conn.Close() })
	return bfspb.NewNameServerClient(conn)
}

// waitChunkservers waits until every chunkserver has registered with the
// leader (see cluster.waitChunkservers).
func (g *group) waitChunkservers() {
	g.t.Helper()
	if len(g.cs) == 0 {
		return
	}
	g.probes++
	probeChunkservers(g.t, g.nsConn(), len(g.cs), g.probes)
}

// client returns an SDK client of the group, closed at the end of the
// test.
func (g *group) client(opts ...sdk.Option) *sdk.Client {
	g.t.Helper()
	cl, err := sdk.Dial(context.Background(), g.list(), append([]sdk.Option{sdk.WithCertsDir(certsDir, certs.ClientUser)}, opts...)...)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { cl.Close() })
	return cl
}

// bfs runs the bfs tool against the group (as the admin) and returns its
// stdout and exit code.
func (g *group) bfs(args ...string) (string, int) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bfsBin, append([]string{"--nameserver", g.list()}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			g.t.Fatalf("bfs %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	if code != 0 {
		g.t.Logf("bfs %v exited %d: %s", args, code, stderr.String())
	}
	return string(out), code
}

// groupJSON is `bfs cluster status -o json`.
type groupJSON struct {
	ClusterID string `json:"cluster_id"`
	Leader    string `json:"leader"`
	Members   []struct {
		Name         string `json:"name"`
		Reachable    bool   `json:"reachable"`
		Role         string `json:"role"`
		Voter        bool   `json:"voter"`
		Term         uint64 `json:"term"`
		CommitIndex  uint64 `json:"commit_index"`
		AppliedIndex uint64 `json:"applied_index"`
	} `json:"members"`
}

// status is `bfs cluster status -o json` and its exit code.
func (g *group) status() (groupJSON, int) {
	g.t.Helper()
	out, code := g.bfs("cluster", "status", "-o", "json")
	var st groupJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		g.t.Fatalf("bfs cluster status -o json printed %q: %v", out, err)
	}
	return st, code
}

// trials returns n, or fewer if $BFS_HA_TRIALS asks for fewer (CI runs
// the group's tests with fewer trials than the full counts).
func trials(t *testing.T, n int) int {
	t.Helper()
	s := os.Getenv("BFS_HA_TRIALS")
	if s == "" {
		return n
	}
	m, err := strconv.Atoi(s)
	if err != nil || m < 1 {
		t.Fatalf("$BFS_HA_TRIALS=%q is not a positive number", s)
	}
	return min(n, m)
}
