package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/nsgroup"
	"github.com/bfs-go/bfs/nameserver/replica"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// The failover half of the ha benchmark: a group of three nameservers and
// three chunkservers, each a process (haprocs.go), default timeouts. Each
// trial waits until the group is steady (one leader, the followers caught
// up, every chunkserver registered with the leader), kills the leader
// with SIGKILL and times, from just before the kill, the first success of
// each of three probes that start right after it, each on a connection of
// its own that followed the old leader (the SDK's nsgroup, as every client
// has): LockDir of a directory, KeepAlive of the session, and AddBlock of
// a file the session has open for write (which also needs a chunkserver
// registered with the new leader). The killed nameserver is started again
// on its data before the next trial.

const (
	// haGroupSize is how many nameservers (and chunkservers) the failover
	// group has.
	haGroupSize = 3
	// failoverGiveUp is how long after the kill a probe keeps trying; one
	// that has not succeeded by then counts as an error of its row.
	failoverGiveUp = 30 * time.Second
	// failoverRetryPause is the pause after an attempt that failed fast.
	failoverRetryPause = 10 * time.Millisecond
	// steadyTimeout bounds the wait for a steady group before a trial.
	steadyTimeout = 60 * time.Second
	// failoverTarget is the bound on the p99 of each probe.
	failoverTarget = 2 * time.Second
)

// The failover rows, one per probe, and the election's.
const (
	failoverElectionRow = "ha failover: new leader"
	failoverLockRow     = "ha failover: LockDir"
	failoverKeepRow     = "ha failover: KeepAlive"
	failoverAddBlockRow = "ha failover: AddBlock"
)

var failoverProbeRows = []string{failoverLockRow, failoverKeepRow, failoverAddBlockRow}

// procGroup is the group of daemon processes.
type procGroup struct {
	dir string
	// tls and csTLS are the nameservers' and the chunkservers' flags for
	// TLS (--certs-dir or --insecure); client and admin the certificates
	// this side presents (nil in plaintext).
	tls, csTLS    []string
	client, admin *certs.Creds
	ns, cs        []*proc
	// nsAddrs are the nameservers' client addresses, fixed across
	// restarts.
	nsAddrs []string
}

// startProcGroup starts haGroupSize nameservers bootstrapping one group,
// then as many chunkservers, with their data under dir.
func startProcGroup(ctx context.Context, dir string, secure bool) (*procGroup, error) {
	g := &procGroup{dir: dir, tls: []string{"--insecure"}, csTLS: []string{"--insecure"}}
	if secure {
		if err := makeCerts(dir); err != nil {
			return nil, err
		}
		certsDir := filepath.Join(dir, "certs")
		g.tls = []string{"--certs-dir", certsDir}
		g.csTLS = []string{"--certs-dir", chunkserverCertsDir(dir)}
		var err error
		if g.client, err = certs.LoadClient(certsDir, certs.ClientUser); err != nil {
			return nil, err
		}
		if g.admin, err = certs.LoadClient(certsDir, certs.AdminUser); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(2 * haGroupSize)
	if err != nil {
		return nil, err
	}
	var peers []string
	for i := range haGroupSize {
		peers = append(peers, fmt.Sprintf("ns%d=127.0.0.1:%d", i+1, ports[2*i+1]))
		g.nsAddrs = append(g.nsAddrs, fmt.Sprintf("127.0.0.1:%d", ports[2*i]))
	}
	for i := range haGroupSize {
		name := fmt.Sprintf("ns%d", i+1)
		p, err := startProc(ctx, name, filepath.Join(dir, name+".log"), append([]string{"nameserver",
			"--id", name, "--data", filepath.Join(dir, name), "--listen", g.nsAddrs[i], "--metrics", "",
			"--raft-listen", fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), "--initial-cluster", strings.Join(peers, ",")}, g.tls...)...)
		if err != nil {
			g.stop()
			return nil, err
		}
		g.ns = append(g.ns, p)
	}
	for i := range haGroupSize {
		name := fmt.Sprintf("cs%d", i+1)
		p, err := startProc(ctx, name, filepath.Join(dir, name+".log"), append([]string{"chunkserver",
			"--data", filepath.Join(dir, name), "--listen", "127.0.0.1:0", "--metrics", "",
			"--nameserver", g.addrList()}, g.csTLS...)...)
		if err != nil {
			g.stop()
			return nil, err
		}
		g.cs = append(g.cs, p)
	}
	return g, nil
}

func (g *procGroup) addrList() string { return strings.Join(g.nsAddrs, ",") }

// stop stops every daemon.
func (g *procGroup) stop() { stopAll(append(append([]*proc(nil), g.cs...), g.ns...)...) }

// conn is a connection to the group that follows its leader, as the
// SDK's, presenting creds. Calls of LockDir, KeepAlive and AddBlock (as
// the SDK, which sends them again when their outcome is unknown) and of
// the reads are retried across a failover by the connection itself.
func (g *procGroup) conn(creds *certs.Creds) (*nsgroup.Conn, error) {
	idempotent := map[string]bool{}
	for _, m := range []string{"LockDir", "KeepAlive", "AddBlock", "Stat", "ListChunkservers", "ClusterStatus"} {
		idempotent["/bfs.NameServer/"+m] = true
	}
	return nsgroup.New(nsgroup.Config{
		Addrs:       g.nsAddrs,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(certs.TransportCredentials(creds))},
		Idempotent:  idempotent,
	})
}

// memberStatus asks nameserver i about itself on a connection of its own
// (a connection kept would wait out gRPC's reconnect backoff after a
// restart).
func (g *procGroup) memberStatus(ctx context.Context, i int) (*bfspb.ClusterStatusResponse, error) {
	cc, err := grpc.NewClient(g.nsAddrs[i], grpc.WithTransportCredentials(certs.TransportCredentials(g.admin)))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return bfspb.NewNameServerClient(cc).ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
}

// steady is a group ready for a trial: its leader and term.
type steady struct {
	leader int
	term   uint64
}

// waitSteady waits until every nameserver runs and answers, one leads and
// the others follow it in the same term having applied what it had
// committed, and the leader counts every chunkserver live.
func (g *procGroup) waitSteady(ctx context.Context, admin bfspb.NameServerClient) (steady, error) {
	var st steady
	err := poll(ctx, steadyTimeout, "a steady nameserver group", func() (bool, error) {
		var ok bool
		st, ok = g.steadyNow(ctx)
		if !ok {
			return false, nil
		}
		resp, err := admin.ListChunkservers(ctx, &bfspb.ListChunkserversRequest{})
		if err != nil || resp.Status != bfspb.StatusCode_OK {
			return false, nil
		}
		live := 0
		for _, c := range resp.Chunkservers {
			if c.State == bfspb.ChunkserverState_CHUNKSERVER_STATE_LIVE {
				live++
			}
		}
		return live == len(g.cs), nil
	})
	return st, err
}

func (g *procGroup) steadyNow(ctx context.Context) (steady, bool) {
	sts := make([]*bfspb.ClusterStatusResponse, len(g.ns))
	st := steady{leader: -1}
	for i := range g.ns {
		s, err := g.memberStatus(ctx, i)
		if err != nil {
			return st, false
		}
		sts[i] = s
		if s.Role == "leader" {
			st.leader, st.term = i, s.Term
		}
	}
	if st.leader < 0 {
		return st, false
	}
	for _, m := range sts[st.leader].Members {
		if m.ClientAddress == "" {
			return st, false // not published yet: NOT_LEADER could not name the leader
		}
	}
	for i, s := range sts {
		if i != st.leader && (s.Role != "follower" || s.Term != st.term || s.AppliedIndex < sts[st.leader].CommitIndex) {
			return st, false
		}
	}
	return st, true
}

// failover measures trials failovers.
func failover(ctx context.Context, c *common, dir string, trials int) ([]bench.Result, error) {
	c.progressf("starting %d nameserver and %d chunkserver processes in %s...", haGroupSize, haGroupSize, dir)
	g, err := startProcGroup(ctx, dir, !c.insecure)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	setupConn, err := g.conn(g.admin)
	if err != nil {
		return nil, err
	}
	defer setupConn.Close()
	ownerConn, err := g.conn(g.client)
	if err != nil {
		return nil, err
	}
	defer ownerConn.Close()
	f := &failoverRun{c: c, g: g, setup: bfspb.NewNameServerClient(setupConn), owner: bfspb.NewNameServerClient(ownerConn),
		root: c.root() + "/ha/failover"}
	samples := map[string][]time.Duration{}
	failed := map[string]int64{}
	for t := 1; t <= trials; t++ {
		got, err := f.trial(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("failover trial %d: %w (the daemons' logs are in %s)", t, err, dir)
		}
		var line []string
		for _, row := range append([]string{failoverElectionRow}, failoverProbeRows...) {
			d, ok := got[row]
			if !ok {
				failed[row]++
				line = append(line, strings.TrimPrefix(row, "ha failover: ")+" never")
				continue
			}
			samples[row] = append(samples[row], d)
			line = append(line, fmt.Sprintf("%s %v", strings.TrimPrefix(row, "ha failover: "), d.Round(time.Millisecond)))
		}
		c.progressf("failover trial %d: %s", t, strings.Join(line, ", "))
	}
	var out []bench.Result
	for _, row := range append([]string{failoverElectionRow}, failoverProbeRows...) {
		r := bench.Summarize(row, 1, samples[row], failed[row])
		r.Param = fmt.Sprintf("voters=%d", haGroupSize)
		r.Note = failoverNote
		if row == failoverElectionRow {
			r.Note = failoverElectionNote
		}
		out = append(out, r)
	}
	return out, nil
}

var (
	failoverNote = fmt.Sprintf("from just before kill -9 of the leader nameserver (a process of 3; default timeouts: heartbeat %v, election %v) to the first OK of the RPC, "+
		"sent again until then on a connection of its own that had found the old leader (the SDK's nsgroup); session TTL %v; errors: trials in which it never succeeded within %v",
		replica.DefaultHeartbeatTimeout, replica.DefaultElectionTimeout, sdk.DefaultSessionTTL, failoverGiveUp)
	failoverElectionNote = fmt.Sprintf("from just before kill -9 of the leader to the first answer of a survivor saying it leads in a newer term (polled every %v)", failoverRetryPause)
)

// failoverRun is the state the trials share.
type failoverRun struct {
	c *common
	g *procGroup
	// setup waits for a steady group, as the admin; owner opens, uses
	// and closes the probes' session, as the client the probes are (a
	// session belongs to the identity that opened it).
	setup, owner bfspb.NameServerClient
	root         string
}

// trial makes one failover and returns when each row's event happened
// after the kill (a row missing never happened).
func (f *failoverRun) trial(ctx context.Context, t int) (map[string]time.Duration, error) {
	st, err := f.g.waitSteady(ctx, f.setup)
	if err != nil {
		return nil, err
	}
	sid, dir, err := f.prepare(ctx, t)
	if err != nil {
		return nil, err
	}
	// Each probe on a connection of its own, warmed up on the leader as
	// a client's would be.
	probes := make([]bfspb.NameServerClient, len(failoverProbeRows))
	for i := range probes {
		conn, err := f.g.conn(f.g.client)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		probes[i] = bfspb.NewNameServerClient(conn)
		if _, err := probes[i].Stat(ctx, &bfspb.StatRequest{Path: dir}); err != nil {
			return nil, err
		}
	}
	calls := map[string]func(context.Context, bfspb.NameServerClient) (bfspb.StatusCode, error){
		failoverLockRow: func(ctx context.Context, ns bfspb.NameServerClient) (bfspb.StatusCode, error) {
			r, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: dir + "/locked", SessionId: sid})
			return r.GetStatus(), err
		},
		failoverKeepRow: func(ctx context.Context, ns bfspb.NameServerClient) (bfspb.StatusCode, error) {
			r, err := ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: sid})
			return r.GetStatus(), err
		},
		failoverAddBlockRow: func(ctx context.Context, ns bfspb.NameServerClient) (bfspb.StatusCode, error) {
			r, err := ns.AddBlock(ctx, &bfspb.AddBlockRequest{Path: dir + "/file", SessionId: sid})
			return r.GetStatus(), err
		},
	}
	survivors := make([]int, 0, haGroupSize-1)
	for i := range f.g.ns {
		if i != st.leader {
			survivors = append(survivors, i)
		}
	}
	got := map[string]time.Duration{}
	var mu sync.Mutex
	record := func(row string, d time.Duration) {
		mu.Lock()
		got[row] = d
		mu.Unlock()
	}
	never := func(row, last string) {
		f.c.progressf("failover trial %d: %s never succeeded within %v; its last answer: %s", t, row, failoverGiveUp, last)
	}
	gctx, cancel := context.WithTimeout(ctx, failoverGiveUp)
	defer cancel()
	start := time.Now()
	f.g.ns[st.leader].kill()
	var wg sync.WaitGroup
	wg.Go(func() {
		if d, ok := f.waitElection(gctx, start, survivors, st.term); ok {
			record(failoverElectionRow, d)
		}
	})
	for i, row := range failoverProbeRows {
		wg.Go(func() {
			if d, last, ok := probeUntilOK(gctx, start, probes[i], calls[row]); ok {
				record(row, d)
			} else {
				never(row, last)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.g.ns[st.leader], err = f.g.ns[st.leader].restart(ctx); err != nil {
		return nil, err
	}
	// The session ends, closing its file and releasing its lock, so that
	// no trial leaves work behind for the next.
	if r, err := f.owner.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: sid}); err != nil || r.Status != bfspb.StatusCode_OK {
		f.c.progressf("failover trial %d: closing the probes' session: %v %v", t, r.GetStatus(), errors.Join(err, statusErr(r.GetStatus(), r.GetMessage())))
	}
	return got, nil
}

// prepare opens the probes' session and makes the trial's directory, the
// directory to lock in it, and the file open for write whose block is
// asked for.
func (f *failoverRun) prepare(ctx context.Context, t int) (sid, dir string, err error) {
	open, err := f.owner.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "bfsbench-ha-probe", TtlMs: sdk.DefaultSessionTTL.Milliseconds()})
	if err = errors.Join(err, statusErr(open.GetStatus(), open.GetMessage())); err != nil {
		return "", "", fmt.Errorf("open session: %w", err)
	}
	sid, dir = open.SessionId, fmt.Sprintf("%s/t%d", f.root, t)
	mk, err := f.owner.Mkdir(ctx, &bfspb.MkdirRequest{Path: dir + "/locked", Mode: 0o755, Parents: true, SessionId: sid})
	if err = errors.Join(err, statusErr(mk.GetStatus(), mk.GetMessage())); err != nil {
		return "", "", fmt.Errorf("mkdir %s/locked: %w", dir, err)
	}
	cr, err := f.owner.Create(ctx, &bfspb.CreateRequest{Path: dir + "/file", Mode: 0o644, Replication: 3, SessionId: sid, OpenForWrite: true})
	if err = errors.Join(err, statusErr(cr.GetStatus(), cr.GetMessage())); err != nil {
		return "", "", fmt.Errorf("create %s/file: %w", dir, err)
	}
	return sid, dir, nil
}

func statusErr(code bfspb.StatusCode, msg string) error {
	if code == bfspb.StatusCode_OK {
		return nil
	}
	return fmt.Errorf("%v %s", code, msg)
}

// waitElection polls the survivors until one says it leads in a term
// after old, and returns how long after start that was.
func (f *failoverRun) waitElection(ctx context.Context, start time.Time, survivors []int, old uint64) (time.Duration, bool) {
	for ctx.Err() == nil {
		for _, i := range survivors {
			if s, err := f.g.memberStatus(ctx, i); err == nil && s.Role == "leader" && s.Term > old {
				return time.Since(start), true
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(failoverRetryPause):
		}
	}
	return 0, false
}

// probeUntilOK calls call until it answers OK and returns how long after
// start that was; if ctx ends first, false and the last answer.
func probeUntilOK(ctx context.Context, start time.Time, ns bfspb.NameServerClient, call func(context.Context, bfspb.NameServerClient) (bfspb.StatusCode, error)) (time.Duration, string, bool) {
	last := "none"
	for ctx.Err() == nil {
		code, err := call(ctx, ns)
		if err == nil && code == bfspb.StatusCode_OK {
			return time.Since(start), "", true
		}
		if last = code.String(); err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
		case <-time.After(failoverRetryPause):
		}
	}
	return 0, last, false
}
