package benchcmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/internal/certs"
)

// The etcd peer of the locks benchmark: one member, embedded in this
// process as the bfs sandbox is, with its data on the same disk and its
// fsyncs left on, driven through concurrency.Mutex, etcd's own lock
// recipe. The ha benchmark starts a group of three the same way.

const (
	// etcdStartTimeout bounds starting the embedded member (it elects
	// itself within an election timeout of one second).
	etcdStartTimeout = 30 * time.Second
	// etcdStartAttempts is how often a start is retried with fresh ports:
	// a free port picked here can be taken before etcd listens on it.
	etcdStartAttempts = 3
	// etcdSessionTTL is the TTL in seconds of every client's session (its
	// lease). etcd's default; no session expires during a run.
	etcdSessionTTL = 60
)

// etcdLocksNote says what the etcd row measured; local says whether the
// bfs cluster was started here (so that etcd's data is on its disk).
func etcdLocksNote(local bool) string {
	where := "data on the same disk as the bfs cluster's"
	if !local {
		where = "data in this host's temp dir (the bfs cluster's disks are elsewhere)"
	}
	return "one op = concurrency.Mutex Lock + Unlock on a key prefix of its own (two durable Raft commits: the lease-bound key put in a Txn, and its delete); embedded one-member etcd v3.7, fsync on, " + where + "; each client its own clientv3 connection and session"
}

// etcdServer is an embedded one-member etcd started for one benchmark.
type etcdServer struct {
	e        *embed.Etcd
	endpoint string
	// logLevel is the level of etcd's log, raised at close to silence the
	// errors etcd logs about its own listeners closing.
	logLevel zap.AtomicLevel
}

// startEtcd starts a one-member etcd with its data in dir (which must not
// exist yet or be empty), on free loopback ports, logging errors to log.
func startEtcd(ctx context.Context, dir string, log io.Writer) (*etcdServer, error) {
	g, err := startEtcdGroup(ctx, []string{dir}, "", log)
	if err != nil {
		return nil, err
	}
	return g.members[0], nil
}

// etcdGroup is an embedded etcd cluster of one or more members, all in
// this process, on loopback.
type etcdGroup struct {
	members []*etcdServer
	// certsDir holds the certificates of its mutual TLS ("": plaintext).
	certsDir string
}

// startEtcdGroup starts an etcd cluster of len(dirs) members, member i
// with its data in dirs[i] (which must not exist yet or be empty), on free
// loopback ports, logging errors to log. It returns once every member
// serves and the cluster has a leader. With certsDir, the clients' and
// the peers' links are mutual TLS, as a bfs sandbox's, with its
// certificates (node.crt serving and dialing, the CA of ca.crt).
func startEtcdGroup(ctx context.Context, dirs []string, certsDir string, log io.Writer) (*etcdGroup, error) {
	var errs []error
	for range etcdStartAttempts {
		g, err := startEtcdGroupOnce(ctx, dirs, certsDir, log)
		if err == nil {
			return g, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		// A failed start may leave half-written members behind.
		for _, dir := range dirs {
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("starting etcd: %w", errors.Join(append(errs, err)...))
			}
		}
	}
	return nil, fmt.Errorf("starting etcd: %w", errors.Join(errs...))
}

func startEtcdGroupOnce(ctx context.Context, dirs []string, certsDir string, log io.Writer) (*etcdGroup, error) {
	n := len(dirs)
	// Per member: the client port (gRPC only), the peer port, and a port
	// of its own for etcd's HTTP gateway: without one, etcd serves gRPC
	// over TLS through net/http (grpc.Server.ServeHTTP), which cost it
	// half as much CPU again per lock cycle as gRPC's own transport
	// (bfsbench ha, BUILD.md): etcd at its best is the fair peer.
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	var tlsInfo transport.TLSInfo
	if certsDir != "" {
		scheme = "https"
		tlsInfo = transport.TLSInfo{
			CertFile:       filepath.Join(certsDir, certs.NodeCertFile),
			KeyFile:        filepath.Join(certsDir, certs.NodeKeyFile),
			TrustedCAFile:  filepath.Join(certsDir, certs.CAFile),
			ClientCertAuth: true,
		}
	}
	at := func(port int) url.URL { return url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", port)} }
	// The member's name, and its logger's.
	name, logName := func(i int) string { return "bfsbench" }, func(int) string { return "etcd" }
	if n > 1 {
		name = func(i int) string { return fmt.Sprintf("bfsbench-%d", i) }
		logName = func(i int) string { return fmt.Sprintf("etcd-%d", i) }
	}
	var initial []string
	for i := range n {
		peer := at(ports[3*i+1])
		initial = append(initial, name(i)+"="+peer.String())
	}
	g := &etcdGroup{certsDir: certsDir}
	for i, dir := range dirs {
		client, peer, gateway := at(ports[3*i]), at(ports[3*i+1]), at(ports[3*i+2])
		cfg := embed.NewConfig()
		cfg.Name = name(i)
		cfg.Dir = dir
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.ListenClientHttpUrls = []url.URL{gateway}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "bfsbench"
		cfg.ClientTLSInfo, cfg.PeerTLSInfo = tlsInfo, tlsInfo
		level := zap.NewAtomicLevelAt(zap.ErrorLevel)
		cfg.LogLevel = "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
			zapcore.NewConsoleEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(log), level)).Named(logName(i)))
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			g.close()
			return nil, err
		}
		g.members = append(g.members, &etcdServer{e: e, endpoint: client.Host, logLevel: level})
	}
	if err := g.waitReady(ctx); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// waitReady waits until every member serves (which takes a leader).
func (g *etcdGroup) waitReady(ctx context.Context) error {
	timeout := time.NewTimer(etcdStartTimeout)
	defer timeout.Stop()
	for _, m := range g.members {
		select {
		case <-m.e.Server.ReadyNotify():
		case err := <-m.e.Err():
			return err
		case <-timeout.C:
			return fmt.Errorf("etcd not ready after %v", etcdStartTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// leaderEndpoint is the client address of the member that leads, "" if
// none does at the moment.
func (g *etcdGroup) leaderEndpoint() string {
	for _, m := range g.members {
		if m.e.Server.Leader() == m.e.Server.MemberID() {
			return m.endpoint
		}
	}
	return ""
}

// term is the highest Raft term a member knows: each election takes a
// new one.
func (g *etcdGroup) term() uint64 {
	var t uint64
	for _, m := range g.members {
		t = max(t, m.e.Server.Term())
	}
	return t
}

func (g *etcdGroup) close() {
	for _, m := range g.members {
		m.close()
	}
}

// freePorts returns n loopback TCP ports that were free a moment ago
// (embed listens on the URLs it is given and cannot report a port 0).
func freePorts(n int) ([]int, error) {
	var ports []int
	var lis []net.Listener
	defer func() {
		for _, l := range lis {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lis = append(lis, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (s *etcdServer) close() {
	s.logLevel.SetLevel(zap.FatalLevel)
	s.e.Close()
}

// etcdDir returns a fresh directory for etcd's data beside the cluster's
// (on the same disk) and a function that removes it. Against a running
// cluster, whose disks are elsewhere, it is in this host's temp dir.
func etcdDir(cl *cluster) (string, func(), error) {
	parent := cl.dir
	if !cl.local() {
		parent = ""
	}
	d, err := os.MkdirTemp(parent, "etcd-")
	if err != nil {
		return "", nil, err
	}
	// embed wants to create the member directory itself, with its mode.
	dir := filepath.Join(d, "member-data")
	return dir, func() { os.RemoveAll(d) }, nil
}

// etcdLockers are N etcd clients, each with its own connection and
// session.
type etcdLockers struct {
	clients  []*clientv3.Client
	sessions []*concurrency.Session
}

func newEtcdLockers(ctx context.Context, endpoint string, n int) (*etcdLockers, error) {
	return newEtcdLockersTLS(ctx, endpoint, "", n)
}

// newEtcdLockersTLS is newEtcdLockers presenting the client certificate
// of certsDir (certs.ClientUser) to an etcd serving mutual TLS, or in
// plaintext with "".
func newEtcdLockersTLS(ctx context.Context, endpoint, certsDir string, n int) (*etcdLockers, error) {
	var tlsConfig *tls.Config
	if certsDir != "" {
		var err error
		tlsConfig, err = transport.TLSInfo{
			CertFile:      filepath.Join(certsDir, certs.ClientCertFile(certs.ClientUser)),
			KeyFile:       filepath.Join(certsDir, certs.ClientKeyFile(certs.ClientUser)),
			TrustedCAFile: filepath.Join(certsDir, certs.CAFile),
		}.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd client TLS: %w", err)
		}
	}
	l := &etcdLockers{}
	for range n {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{endpoint},
			DialTimeout: 10 * time.Second,
			Context:     ctx,
			Logger:      zap.NewNop(),
			TLS:         tlsConfig,
		})
		if err != nil {
			l.close()
			return nil, err
		}
		l.clients = append(l.clients, cli)
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(etcdSessionTTL))
		if err != nil {
			l.close()
			return nil, err
		}
		l.sessions = append(l.sessions, s)
	}
	return l, nil
}

// op returns the benchmark's op: client ci locks and unlocks a mutex of
// its session on the key prefix <prefix>/c<ci>.
func (l *etcdLockers) op(prefix string) bench.Op {
	mutexes := make([]*concurrency.Mutex, len(l.sessions))
	for i, s := range l.sessions {
		mutexes[i] = concurrency.NewMutex(s, fmt.Sprintf("%s/c%d", prefix, i))
	}
	return func(ctx context.Context, ci, _ int) error {
		m := mutexes[ci]
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
}

// close ends the sessions (revoking their leases) and the connections.
func (l *etcdLockers) close() {
	for _, s := range l.sessions {
		s.Close()
	}
	for _, c := range l.clients {
		c.Close()
	}
}

// etcdRatioNote says what the bfs/etcd row is.
const etcdRatioNote = "bfs lock+unlock throughput over etcd's with the same clients, measured alternately in halves of --duration (target ≥ 3x at 64 clients)"

// etcdRatio is the bfs/etcd throughput ratio row of one client count.
func etcdRatio(bfs, etcd bench.Result) bench.Result {
	r := bench.Result{Name: "bfs/etcd lock+unlock", Clients: bfs.Clients, Unit: "x", Note: etcdRatioNote}
	if e := etcd.OpsPerSec(); e > 0 {
		r.Value = bfs.OpsPerSec() / e
	}
	return r
}
