package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Peer is a member of the group as --initial-cluster names it: its name
// (Raft server id) and the address its peers dial.
type Peer struct {
	Name    string
	Address string
}

// Config configures a Node.
type Config struct {
	// Dir holds the Raft log, the snapshots and scratch space (not the
	// namespace: that is the store's).
	Dir string
	// Name is this node's id in the group; RaftAddress the address its
	// peers dial (advertised); Listener accepts their connections.
	Name        string
	RaftAddress string
	Listener    net.Listener
	// Dial, if set, makes the connections to peers (TLS, a test's proxy);
	// plain TCP otherwise.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// TLS, if set, secures every Raft connection (after its hello line).
	TLS TLS
	// Local, for a group of one only, replaces the network transport
	// with one in memory (no Listener): for tests whose goroutines must
	// all block on channels (a testing/synctest bubble).
	Local bool
	// InitialCluster is the group bootstrapped the first time the data
	// directories are empty; empty means a one-voter group of this node.
	// Ignored once the node has Raft state, except that it must not
	// contradict it (see Open).
	InitialCluster []Peer
	// Join makes a node without Raft state wait to be added to an
	// existing group (bfs cluster add) instead of bootstrapping one.
	Join bool
	// Raft timing; zero values take the defaults below.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout time.Duration
	// SnapshotInterval and SnapshotThreshold say when to snapshot;
	// TrailingLogs how many entries stay in the log after one.
	SnapshotInterval                time.Duration
	SnapshotThreshold, TrailingLogs uint64
	// ApplyTimeout bounds how long Propose waits to enqueue a command.
	ApplyTimeout time.Duration
	// OnLeadership is told, from one goroutine and in order, when this
	// node becomes leader (with the Raft term) and when it stops being
	// one. Required.
	OnLeadership func(leader bool, term uint64)
	// OnFatal is told, once, when the node stopped applying after a
	// storage failure. Required.
	OnFatal func(error)
	// OnApply, if set, is told of each batch applied, for metrics.
	OnApply func(entries int, seconds float64)
}

// Default timing: a leader's death is noticed within about a second and
// a new one elected soon after (SPEC §9's failover budget is 2 s).
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultCommitTimeout      = 10 * time.Millisecond
	DefaultApplyTimeout       = 5 * time.Second
	DefaultSnapshotThreshold  = 16384
	DefaultTrailingLogs       = 10240
	DefaultSnapshotInterval   = 2 * time.Minute
)

// Errors of Propose and of the leader-only calls.
var (
	// ErrNotLeader: this node is not the leader; nothing was applied.
	ErrNotLeader = errors.New("not the leader")
	// ErrUnavailable: the outcome is unknown (leadership was lost while
	// committing, the node is shutting down, the group has no majority).
	ErrUnavailable = errors.New("nameserver group unavailable")
)

// Node is this nameserver's replica of the group: Raft driving the
// namespace. See the package documentation.
type Node struct {
	cfg   Config
	store *namespace.Store
	raft  *raft.Raft
	logs  *LogStore
	snaps *raft.FileSnapshotStore
	trans raft.Transport
	fsm   *fsm

	notifyc chan bool
	donec   chan struct{}
	started atomic.Bool
	// moved is set when a group of one starts at another address than
	// it stored: it records the new one when it leads.
	moved bool

	closeOnce sync.Once
	closeErr  error
}

// Open starts the replica over store: it bootstraps the group on a first
// start, restores the store from the newest snapshot if the store is
// behind it, and joins Raft. OnLeadership is called only after Start. Open refuses a start whose --initial-cluster
// contradicts the membership the node has stored, or that names a member
// twice, and changes nothing then.
func Open(cfg Config, store *namespace.Store) (*Node, error) {
	if err := cfg.fill(true); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, store: store, notifyc: make(chan bool, 16), donec: make(chan struct{})}
	if err := n.open(); err != nil {
		n.closeStores()
		return nil, err
	}
	return n, nil
}

// Start starts telling OnLeadership of leadership changes (none is lost
// meanwhile): the owner calls it once it has wired the node in. Call it
// once.
func (n *Node) Start() {
	n.started.Store(true)
	go n.watchLeadership()
}

// fill checks c and sets its defaults; a node that will listen needs a
// Listener (or Local).
func (c *Config) fill(listening bool) error {
	switch {
	case c.Dir == "" || c.Name == "" || c.RaftAddress == "" || listening && c.Listener == nil && !c.Local:
		return errors.New("replica: Dir, Name, RaftAddress and Listener are required")
	case c.Local && len(c.InitialCluster) > 0:
		return errors.New("replica: a Local node is a group of one")
	case c.OnLeadership == nil || c.OnFatal == nil:
		return errors.New("replica: OnLeadership and OnFatal are required")
	}
	if err := checkPeers(c.InitialCluster); err != nil {
		return err
	}
	if len(c.InitialCluster) > 0 && !slices.Contains(c.InitialCluster, Peer{c.Name, c.RaftAddress}) {
		return fmt.Errorf("replica: --initial-cluster %s does not name this node (%s=%s): check --id and --raft-advertise",
			peersString(c.InitialCluster), c.Name, c.RaftAddress)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	def(&c.ElectionTimeout, DefaultElectionTimeout)
	def(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	def(&c.CommitTimeout, DefaultCommitTimeout)
	def(&c.ApplyTimeout, DefaultApplyTimeout)
	def(&c.SnapshotInterval, DefaultSnapshotInterval)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	return nil
}

// checkPeers refuses a member named twice, an address given twice, or an
// empty name or address.
func checkPeers(peers []Peer) error {
	names, addrs := map[string]bool{}, map[string]bool{}
	for _, p := range peers {
		switch {
		case p.Name == "" || p.Address == "":
			return fmt.Errorf("replica: --initial-cluster member %q=%q: a member needs a name and an address", p.Name, p.Address)
		case names[p.Name]:
			return fmt.Errorf("replica: --initial-cluster names %q twice", p.Name)
		case addrs[p.Address]:
			return fmt.Errorf("replica: --initial-cluster gives the address %s twice", p.Address)
		}
		names[p.Name], addrs[p.Address] = true, true
	}
	return nil
}

func peersString(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.Name + "=" + p.Address
	}
	return strings.Join(parts, ",")
}

// open sets up the stores, the transport and Raft.
func (n *Node) open() error {
	for _, d := range []string{n.cfg.Dir, n.scratch()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("replica: %w", err)
		}
	}
	// Scratch holds only what a previous process left half made.
	if err := clearDir(n.scratch()); err != nil {
		return err
	}
	var err error
	if n.logs, err = OpenLogStore(LogStoreOptions{Dir: filepath.Join(n.cfg.Dir, "log"), Logger: pebbleLogger{}}); err != nil {
		return err
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(n.cfg.Dir, "snapshots"), 2, raftLogger("raft-snapshots")); err != nil {
		return fmt.Errorf("replica: snapshot store: %w", err)
	}
	n.fsm = &fsm{store: n.store, scratch: n.scratch(), fatal: n.failed, onApply: n.cfg.OnApply}
	if err := n.catchUpFromSnapshot(); err != nil {
		return err
	}
	rc := n.raftConfig()
	n.trans = n.transport()
	if err := n.bootstrap(rc); err != nil {
		return err
	}
	cache, err := raft.NewLogCache(1024, n.logs)
	if err != nil {
		return fmt.Errorf("replica: log cache: %w", err)
	}
	if n.raft, err = raft.NewRaft(rc, n.fsm, cache, n.logs, n.snaps, n.trans); err != nil {
		return fmt.Errorf("replica: start raft: %w", err)
	}
	return nil
}

// transport is the network transport to the peers, or with Local one in
// memory.
func (n *Node) transport() raft.Transport {
	if n.cfg.Local {
		_, t := raft.NewInmemTransport(raft.ServerAddress(n.cfg.RaftAddress))
		return t
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: newStreamLayer(n.cfg.Listener, n.cfg.RaftAddress, n.cfg.Name, n.store.ClusterID, n.cfg.Dial, n.cfg.TLS),
		// Enough connections that a burst of appends does not wait for
		// one: most of the time one or two are in use per peer.
		MaxPool: 4,
		// No pipelined replication: Raft's pipeline can deadlock when a
		// follower fails an append or its connection breaks (the sender
		// parks on a full in-flight channel that nobody drains), after
		// which that follower is never replicated to again and Shutdown
		// never returns (hashicorp/raft#612). One append in flight per
		// follower costs little with batching (HashiCorp's own advice).
		MaxRPCsInFlight: 1,
		Timeout:         10 * time.Second,
		Logger:          raftLogger("raft-net"),
	})
}

func (n *Node) scratch() string { return filepath.Join(n.cfg.Dir, "scratch") }

func (n *Node) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.Name)
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	rc.CommitTimeout = n.cfg.CommitTimeout
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.TrailingLogs = n.cfg.TrailingLogs
	// Commands waiting to be appended go as one batch with one log
	// fsync: the lock path's throughput comes from here.
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	// The store knows what it applied; Open restores it from a snapshot
	// itself only when it is behind one.
	rc.NoSnapshotRestoreOnStart = true
	rc.NotifyCh = n.notifyc
	rc.Logger = raftLogger("raft")
	rc.NoLegacyTelemetry = true
	return rc
}

// catchUpFromSnapshot restores the store from the newest snapshot when
// the store is behind it (its directory was emptied, or a restore was
// cut short): Raft replays only the entries after a snapshot.
func (n *Node) catchUpFromSnapshot() error {
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return err
	}
	_, rc, err := n.snaps.Open(metas[0].ID)
	if err != nil {
		return fmt.Errorf("replica: open snapshot %s: %w", metas[0].ID, err)
	}
	defer rc.Close()
	index, err := snapshotApplied(rc)
	if err != nil {
		return fmt.Errorf("replica: snapshot %s: %w", metas[0].ID, err)
	}
	restoring, err := n.store.Restoring()
	if err != nil {
		return err
	}
	if !restoring && n.store.AppliedIndex() >= index {
		return nil
	}
	glog.Warningf("replica: the namespace has applied through index %d, the newest snapshot through %d: restoring it from the snapshot",
		n.store.AppliedIndex(), index)
	_, rc2, err := n.snaps.Open(metas[0].ID)
	if err != nil {
		return fmt.Errorf("replica: open snapshot %s: %w", metas[0].ID, err)
	}
	return n.fsm.Restore(rc2)
}

// bootstrap writes the group's first configuration on a node without
// Raft state, or checks that --initial-cluster does not contradict the
// configuration stored.
func (n *Node) bootstrap(rc *raft.Config) error {
	peers, err := n.startState(n.store.Formatted(), n.store.ClusterID())
	if err != nil || peers == nil {
		return err
	}
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.Name), Address: raft.ServerAddress(p.Address)})
	}
	glog.Infof("replica: bootstrapping the group %s", peersString(peers))
	if err := raft.BootstrapCluster(rc, n.logs, n.logs, n.snaps, n.trans, conf); err != nil {
		return fmt.Errorf("replica: bootstrap: %w", err)
	}
	return nil
}

// startState says how this node starts: the members of the group to
// bootstrap (nil: none to bootstrap, the node has Raft state or joins a
// group), or why it must not start at all. formatted and cluster tell
// whether the namespace holds a formatted store.
func (n *Node) startState(formatted bool, cluster string) ([]Peer, error) {
	has, err := raft.HasExistingState(n.logs, n.logs, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("replica: read raft state: %w", err)
	}
	if has {
		return nil, n.checkStored()
	}
	if n.cfg.Join {
		glog.Infof("replica: joining an existing group: waiting for its leader to add %s (%s)", n.cfg.Name, n.cfg.RaftAddress)
		return nil, nil
	}
	peers := n.cfg.InitialCluster
	if len(peers) == 0 {
		peers = []Peer{{n.cfg.Name, n.cfg.RaftAddress}}
	}
	if len(peers) > 1 && formatted {
		return nil, fmt.Errorf("replica: this data directory holds a namespace (cluster %s) but no group: a group of %d is bootstrapped from empty directories only; "+
			"start this node alone (without --initial-cluster) and add the others with bfs cluster add", cluster, len(peers))
	}
	return peers, nil
}

// Check refuses a start that Open would refuse (a contradiction of what
// the node stored, a bootstrap over a namespace), reading the node's
// Raft state without writing anything to it. formatted and cluster say
// whether the namespace holds a formatted store. Listener may be nil.
func Check(cfg Config, formatted bool, cluster string) error {
	if err := cfg.fill(false); err != nil {
		return err
	}
	n := &Node{cfg: cfg}
	logDir := filepath.Join(cfg.Dir, "log")
	if _, err := os.Stat(logDir); errors.Is(err, os.ErrNotExist) {
		n.logs, n.snaps = nil, nil
		if cfg.Join || len(cfg.InitialCluster) <= 1 || !formatted {
			return nil
		}
		return fmt.Errorf("replica: this data directory holds a namespace (cluster %s) but no group: a group of %d is bootstrapped from empty directories only; "+
			"start this node alone (without --initial-cluster) and add the others with bfs cluster add", cluster, len(cfg.InitialCluster))
	}
	var err error
	if n.logs, err = OpenLogStore(LogStoreOptions{Dir: logDir, Logger: pebbleLogger{}, ReadOnly: true}); err != nil {
		return err
	}
	defer n.logs.Close()
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir, "snapshots"), 2, raftLogger("raft-snapshots")); err != nil {
		return fmt.Errorf("replica: snapshot store: %w", err)
	}
	_, err = n.startState(formatted, cluster)
	return err
}

// checkStored refuses a start whose identity or --initial-cluster
// contradicts the configuration stored: this node is not a member of it
// under this name and address, or a member is named with another address.
func (n *Node) checkStored() error {
	conf, err := n.storedConfiguration()
	if err != nil {
		return err
	}
	stored := map[string]string{}
	for _, s := range conf.Servers {
		stored[string(s.ID)] = string(s.Address)
	}
	what := "check --data, --id and --raft-advertise"
	switch addr, ok := stored[n.cfg.Name]; {
	case len(stored) == 0:
		return nil // a removed configuration is Raft's to report
	case !ok:
		return fmt.Errorf("replica: this data directory belongs to a group whose members are %s, and this node (%s) is not one of them: %s",
			storedString(stored), n.cfg.Name, what)
	case addr != n.cfg.RaftAddress && len(stored) == 1:
		// A group of one has no peer to find it at its old address: it
		// records the new one once it leads.
		glog.Infof("replica: %s moves from %s to %s", n.cfg.Name, addr, n.cfg.RaftAddress)
		n.moved = true
	case addr != n.cfg.RaftAddress:
		return fmt.Errorf("replica: the group knows %s at %s, not at %s: %s", n.cfg.Name, addr, n.cfg.RaftAddress, what)
	}
	for _, p := range n.cfg.InitialCluster {
		if addr, ok := stored[p.Name]; ok && addr != p.Address {
			return fmt.Errorf("replica: --initial-cluster names %s=%s, but the group stored here knows %s at %s (members %s): "+
				"the flag is used only on a first start; make it agree or leave it out", p.Name, p.Address, p.Name, addr, storedString(stored))
		}
	}
	return nil
}

func storedString(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for name, addr := range m {
		parts = append(parts, name+"="+addr)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// storedConfiguration reads the newest configuration in the log or the
// newest snapshot.
func (n *Node) storedConfiguration() (raft.Configuration, error) {
	last, err := n.logs.LastIndex()
	if err != nil {
		return raft.Configuration{}, err
	}
	first, err := n.logs.FirstIndex()
	if err != nil {
		return raft.Configuration{}, err
	}
	for i := last; i >= first && i > 0; i-- {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			return raft.Configuration{}, fmt.Errorf("replica: read log entry %d: %w", i, err)
		}
		if l.Type == raft.LogConfiguration {
			return raft.DecodeConfiguration(l.Data), nil
		}
	}
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return raft.Configuration{}, err
	}
	return metas[0].Configuration, nil
}

// watchLeadership turns Raft's leadership notifications into
// OnLeadership calls, in order, until Close.
func (n *Node) watchLeadership() {
	defer close(n.donec)
	for leader := range n.notifyc {
		term := uint64(0)
		if leader {
			term = n.raft.CurrentTerm()
			n.recordMove()
		}
		n.cfg.OnLeadership(leader, term)
	}
}

// recordMove records a group of one's new address in its configuration.
func (n *Node) recordMove() {
	if !n.moved {
		return
	}
	if err := n.AddVoter(n.cfg.Name, n.cfg.RaftAddress); err != nil {
		glog.Warningf("replica: recording %s at %s: %v", n.cfg.Name, n.cfg.RaftAddress, err)
		return
	}
	n.moved = false
}

// failed is the fsm's report of a storage failure: the owner closes the
// node (the fsm applies nothing more meanwhile).
func (n *Node) failed(err error) { n.cfg.OnFatal(err) }

// Propose appends cmd to the log and returns what it did once this node
// applied it. It fails with ErrNotLeader (not applied) or ErrUnavailable
// (outcome unknown) when the group cannot say, else with the command's
// own error.
func (n *Node) Propose(cmd *bfspb.Command) (*namespace.Result, error) {
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: encode command: %v", namespace.ErrInvalid, err)
	}
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return nil, n.raftError(err)
	}
	a, ok := f.Response().(*applied)
	if !ok {
		return nil, fmt.Errorf("%w: no response from the state machine", ErrUnavailable)
	}
	return a.res, a.err
}

// raftError classifies an error of Raft's: not applied (not the leader)
// or unknown.
func (n *Node) raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	default:
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
}

// Barrier returns once every entry before it is applied here (leader
// only).
func (n *Node) Barrier(timeout time.Duration) error {
	if err := n.raft.Barrier(timeout).Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

// VerifyLeader returns nil if this node is still the leader: a majority
// answered a round of heartbeats that started after the call.
func (n *Node) VerifyLeader() error {
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

// IsLeader reports whether Raft says this node leads (unverified).
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the name and Raft address of the leader this node knows
// of ("" if none).
func (n *Node) Leader() (name, addr string) {
	a, id := n.raft.LeaderWithID()
	return string(id), string(a)
}

// Name returns this node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Close leaves Raft (without telling the group: a restart rejoins) and
// closes the log store. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var shutdown raft.Future
		if n.raft != nil {
			shutdown = n.raft.Shutdown()
		}
		// The transport closes before Raft's goroutines are waited for:
		// one waiting on a peer that does not answer (a partition) would
		// otherwise hold Shutdown for the transport's whole timeout.
		n.closeTransport()
		if shutdown != nil {
			n.closeErr = shutdown.Error()
		}
		close(n.notifyc)
		if n.started.Load() {
			<-n.donec
		}
		n.closeStores()
	})
	return n.closeErr
}

// closeTransport closes the transport (or, before there is one, the
// listener).
func (n *Node) closeTransport() {
	if c, ok := n.trans.(io.Closer); ok {
		c.Close()
	} else if n.cfg.Listener != nil {
		n.cfg.Listener.Close()
	}
}

// closeStores closes the transport, if still open, and the log store.
func (n *Node) closeStores() {
	n.closeTransport()
	if n.logs != nil {
		if err := n.logs.Close(); err != nil && n.closeErr == nil {
			n.closeErr = err
		}
	}
}

func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("replica: %w", err)
		}
	}
	return nil
}

// Transfer hands leadership to another voter (the most up to date).
func (n *Node) Transfer() error {
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

// TransferTo hands leadership to the voter named name.
func (n *Node) TransferTo(name string) error {
	for _, m := range n.Members() {
		if m.Name == name {
			if err := n.raft.LeadershipTransferToServer(raft.ServerID(name), raft.ServerAddress(m.Address)).Error(); err != nil {
				return n.raftError(err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no member named %q", namespace.ErrNotFound, name)
}

// Member is a member of the group as Raft's configuration has it.
type Member struct {
	Name    string
	Address string
	Voter   bool
}

// Members returns the group's latest configuration (which may not be
// committed yet).
func (n *Node) Members() []Member {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{Name: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out
}

// AddNonvoter adds a member that receives the log but does not vote;
// AddVoter adds one that votes (or promotes a nonvoter). Leader only.
func (n *Node) AddNonvoter(name, addr string) error {
	return n.membership(n.raft.AddNonvoter(raft.ServerID(name), raft.ServerAddress(addr), 0, n.cfg.ApplyTimeout))
}

// AddVoter: see AddNonvoter.
func (n *Node) AddVoter(name, addr string) error {
	return n.membership(n.raft.AddVoter(raft.ServerID(name), raft.ServerAddress(addr), 0, n.cfg.ApplyTimeout))
}

// Remove takes a member out of the group. Leader only.
func (n *Node) Remove(name string) error {
	return n.membership(n.raft.RemoveServer(raft.ServerID(name), 0, n.cfg.ApplyTimeout))
}

func (n *Node) membership(f raft.IndexFuture) error {
	if err := f.Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

// Status is this node's view of its replica.
type Status struct {
	// Role is "leader", "follower", "candidate" or "shutdown"; a
	// follower that does not vote says "nonvoter".
	Role                  string
	Term, Commit, Applied uint64
	LastLogIndex          uint64
	// LeaderName is the leader this node knows of ("" if none).
	LeaderName string
}

// Status reports this node's role, term and indexes.
func (n *Node) Status() Status {
	st := Status{
		Role:    strings.ToLower(n.raft.State().String()),
		Term:    n.raft.CurrentTerm(),
		Commit:  n.raft.CommitIndex(),
		Applied: n.raft.AppliedIndex(),
	}
	st.LeaderName, _ = n.Leader()
	st.LastLogIndex = n.raft.LastIndex()
	if st.Role == "follower" {
		for _, m := range n.Members() {
			if m.Name == n.cfg.Name && !m.Voter {
				st.Role = "nonvoter"
			}
		}
	}
	return st
}

// LastContact returns when this node last heard from the leader (zero
// for the leader itself).
func (n *Node) LastContact() time.Time { return n.raft.LastContact() }
