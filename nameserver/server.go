package nameserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/golang/glog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/connpool"
	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/internal/datadir"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/replica"
	"github.com/bfs-go/bfs/nameserver/statuspage"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// streamWorkers is how many goroutines serve RPCs and are reused from one
// RPC to the next. An RPC on a fresh goroutine grows its stack, copy by
// copy, to the depth a Pebble read needs, which took a tenth of the
// nameserver's CPU under many small RPCs; workers keep their grown stacks.
// RPCs beyond this many at once get a goroutine each, as without workers,
// so a burst of RPCs waiting for a commit never waits for a worker.
const streamWorkers = 128

// flowWindow is the HTTP/2 flow-control window of every stream and
// connection, fixed. gRPC's default, a window sized by bandwidth-delay
// estimation, sends a PING with every request that finds no estimate in
// flight: for small unary RPCs one more frame, write and wakeup each way
// per request, forever, since the estimate never reaches its cap. 16 MiB
// is that cap, so a big block report streams as fast as before.
const flowWindow = 16 << 20

// Server is a nameserver. See the package documentation.
type Server struct {
	bfspb.UnimplementedNameServerServer

	cfg     Config
	ns      *namespace.Store
	node    *replica.Node
	metrics *metrics
	peers   *connpool.Pool
	watch   *watchers
	// waits counts the lock calls waiting (Limits.MaxLockWaitsPerIdentity).
	waits *lockWaits
	// status is the status page on the HTTP port (statuspage.go).
	status *statuspage.Page
	grpc   *grpc.Server
	health *health.Server
	// dataLock holds the data directory (its LOCK file) until Close.
	dataLock *os.File
	// terms starts and ends the leadership terms; lead is the term in
	// office (nil on a follower, or while a term starts or ends).
	terms *terms
	lead  atomic.Pointer[term]

	stopc     chan struct{}
	closeOnce sync.Once
	closeErr  error
	// fatalc carries the replica's storage failure to Serve.
	fatalc chan error
	// raftAddr is the address peers dial; served the client address of
	// the listener Serve was given.
	raftAddr string
	served   atomic.Pointer[string]
	// publishc wakes publishSelf.
	publishc chan struct{}
}

// New opens the nameserver's data directory and joins its group (on a
// first start, bootstraps it). It does not listen for clients: call
// Serve. A data directory another nameserver holds is refused.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dataLock, err := datadir.Lock(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("nameserver: %w", err)
	}
	s, err := newServer(cfg, dataLock)
	if err != nil {
		dataLock.Close()
		return nil, err
	}
	return s, nil
}

// newServer is New once the data directory is locked.
func newServer(cfg Config, dataLock *os.File) (*Server, error) {
	s := &Server{
		cfg:      cfg,
		dataLock: dataLock,
		stopc:    make(chan struct{}),
		fatalc:   make(chan error, 1),
		publishc: make(chan struct{}, 1),
		peers:    connpool.New(grpc.WithTransportCredentials(certs.TransportCredentials(cfg.TLS))),
		watch:    newWatchers(cfg.Limits.WatchBuffer, cfg.Limits.MaxWatchesPerIdentity, cfg.Limits.MaxWatchesPerSession, cfg.Limits.MaxWatches),
		waits:    newLockWaits(cfg.Limits.MaxLockWaitsPerIdentity),
	}
	s.terms = newTerms(s)
	s.metrics = newMetrics(s.liveSessions)
	if err := s.checkStart(); err != nil {
		s.peers.Close()
		return nil, err
	}
	ns, err := namespace.Open(namespace.Options{
		Dir:           filepath.Join(cfg.DataDir, "namespace"),
		Logger:        glogLogger{},
		EventListener: s.metrics.pebbleListener(),
		OnLockChange:  s.publish,
	})
	if err != nil {
		s.peers.Close()
		return nil, err
	}
	s.ns = ns
	s.registerGauges()
	if err := s.startStatusPage(); err != nil {
		ns.Close()
		s.peers.Close()
		return nil, err
	}
	if err := s.openReplica(); err != nil {
		s.status.Close()
		ns.Close()
		s.peers.Close()
		return nil, err
	}
	s.grpc = grpc.NewServer(append(append(daemon.ServerOptions(cfg.TLS), s.metrics.limits.ServerOptions(cfg.Limits.MaxMessageSize)...),
		// Who may ask what is checked on the leader only (authz.go): a
		// follower answers NOT_LEADER, whoever asks.
		grpc.ChainUnaryInterceptor(s.metrics.rpcs.Unary, s.leaderOnly, s.authorize, s.metrics.countRefusals),
		grpc.ChainStreamInterceptor(s.metrics.rpcs.Stream, s.leaderOnlyStream, s.authorizeStream),
		// A page of a block report (chunkserver.DefaultReportPage
		// replicas) fits the default message limit, 4 MiB.
		grpc.WaitForHandlers(true),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.StaticStreamWindowSize(flowWindow),
		grpc.StaticConnWindowSize(flowWindow),
	)...)
	bfspb.RegisterNameServerServer(s.grpc, s)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus(bfspb.NameServer_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(s.grpc)
	return s, nil
}

// Serve answers RPCs on lis (and metrics and the status page on
// cfg.MetricsAddr) until ctx is done, Close is called, or the replica
// stops after a storage failure (then it returns that failure).
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	addr := lis.Addr().String()
	s.served.Store(&addr)
	s.publishSoon()
	glog.Infof("nameserver %s serving clients on %s (its peers reach it at %s)", s.node.Name(), addr, s.raftAddr)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fatal error
	go func() {
		select {
		case fatal = <-s.fatalc:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := daemon.Serve(ctx, s.stopc, s.grpc, s.health, lis, s.cfg.MetricsAddr, s.HTTPHandler(), s.cfg.TLS)
	cancel()
	if fatal != nil {
		s.Close()
		return fmt.Errorf("nameserver: %w", fatal)
	}
	if err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	return nil
}

// Close ends the leadership term in office, leaves the group (a restart
// rejoins it), stops serving and closes the store. It is safe to call
// more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopc)
		s.grpc.Stop()
		s.status.Close()
		s.terms.close()
		s.closeErr = s.node.Close()
		s.peers.Close()
		if err := s.ns.Close(); s.closeErr == nil {
			s.closeErr = err
		}
		if err := s.dataLock.Close(); s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}
