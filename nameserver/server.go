package nameserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/connpool"
	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/internal/datadir"
	"github.com/bfs-go/bfs/internal/taskgroup"
	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/fileclose"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/repair"
	"github.com/bfs-go/bfs/nameserver/session"
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

	cfg      Config
	ns       *namespace.Store
	sessions *session.Manager
	metrics  *metrics
	blocks   *blockmap.Map
	closer   *fileclose.Closer
	cleaner  *dirlock.Cleaner
	peers    *connpool.Pool
	creates  createTracker
	safe     *safeMode
	// repair keeps the blocks' replica counts up (nameserver/repair).
	repair *repair.Scheduler
	// dead remembers the chunkservers declared dead, for the report.
	dead *deadList
	// started is when the server was made.
	started time.Time
	watch   *watchers
	grpc    *grpc.Server
	health  *health.Server
	// tasks are the server's own background work (releasing the locks of
	// ended sessions, deletes of replicas); Close stops them.
	tasks *taskgroup.Group
	// dataLock holds the data directory (its LOCK file) until Close.
	dataLock *os.File

	stopc        chan struct{}
	livenessDone chan struct{}
	closeOnce    sync.Once
	closeErr     error
}

// New opens the nameserver's data directory and recovers its state. It
// does not listen: call Serve. A data directory another nameserver holds
// is refused.
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
		cfg:          cfg,
		dataLock:     dataLock,
		stopc:        make(chan struct{}),
		livenessDone: make(chan struct{}),
		started:      cfg.Clock.Now(),
		peers:        connpool.New(grpc.WithTransportCredentials(insecure.NewCredentials())),
		watch:        newWatchers(),
		tasks:        taskgroup.New(),
	}
	s.blocks = blockmap.New(s.started)
	s.metrics = newMetrics(func() float64 { return float64(len(s.sessions.List())) })
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
	s.dead = newDeadList(s.recordChunkserver)
	s.metrics.lockGauges(ns.Locks().Counts, s.cleaningCounts)
	s.metrics.corruptGauge(s.blocks.CorruptCount)
	s.metrics.registry.MustRegister(newChunkserverCollector(s))
	// If a step below fails, what was started stops in Close's order.
	stops := []func(){func() { ns.Close() }, func() { s.peers.Close() }}
	fail := func(err error) (*Server, error) {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		return nil, err
	}
	if err := s.startSafeMode(); err != nil {
		return fail(err)
	}
	if err := s.loadDraining(); err != nil {
		return fail(err)
	}
	if err := s.loadChunkservers(); err != nil {
		return fail(err)
	}
	if err := s.startRepair(); err != nil {
		return fail(err)
	}
	stops = append(stops, s.repair.Close)
	if err := s.startCleaning(); err != nil {
		return fail(err)
	}
	stops = append(stops, s.stopCleaning)
	if err := s.startSessions(); err != nil {
		return fail(err)
	}
	stops = append(stops, func() { s.sessions.Close() })
	if err := s.recover(); err != nil {
		return fail(err)
	}
	go s.watchChunkservers()
	s.grpc = grpc.NewServer(
		grpc.ChainUnaryInterceptor(s.metrics.rpcs.Unary, s.metrics.countRefusals),
		grpc.ChainStreamInterceptor(s.metrics.rpcs.Stream),
		// No message limit of its own: gRPC's default 4 MiB holds a page
		// of a block report (chunkserver.DefaultReportPage replicas).
		grpc.WaitForHandlers(true),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.StaticStreamWindowSize(flowWindow),
		grpc.StaticConnWindowSize(flowWindow),
	)
	bfspb.RegisterNameServerServer(s.grpc, s)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus(bfspb.NameServer_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(s.grpc)
	return s, nil
}

// startCleaning sets up the closer of files open for write and the
// directory-lock cleaner that drives it; nothing runs until recover.
func (s *Server) startCleaning() error {
	var err error
	s.closer, err = fileclose.New(fileclose.Config{
		Files:           fileStore{Store: s.ns, clock: s.cfg.Clock, closed: func(b int64) { s.repair.Check(b) }},
		Replicas:        s.blocks,
		Chunkservers:    chunkservers{s},
		Clock:           s.cfg.Clock,
		DeadTimeout:     s.cfg.DeadTimeout,
		SealConcurrency: s.cfg.SealConcurrency,
		OnClaimMismatch: s.metrics.claimMismatch.Inc,
		BeforeClose:     s.cfg.TestingKnobs.BeforeClose,
	})
	if err != nil {
		return err
	}
	s.cleaner, err = dirlock.NewCleaner(dirlock.CleanerConfig{
		Closer: s.closer,
		Store:  cleaningStore{s},
		Clock:  s.cfg.Clock,
		OnEnd:  s.cleaned,
	})
	if err != nil {
		s.closer.Close()
	}
	return err
}

// stopCleaning stops the cleanings, then the closes they wait for, then
// the server's own background work, which may have started either.
func (s *Server) stopCleaning() {
	s.cleaner.Close()
	s.closer.Close()
	s.tasks.Stop()
}

func (s *Server) startSessions() error {
	records, err := s.ns.Sessions()
	if err != nil {
		return err
	}
	recovered := make([]session.Session, 0, len(records))
	for _, r := range records {
		recovered = append(recovered, sessionFromRecord(r))
	}
	s.sessions, err = session.NewManager(session.Config{
		Clock:  s.cfg.Clock,
		Store:  sessionStore{s},
		MinTTL: s.cfg.MinSessionTTL,
		MaxTTL: s.cfg.MaxSessionTTL,
		OnEnd:  s.onSessionEnd,
	}, recovered)
	if err == nil {
		glog.Infof("recovered %d sessions, each with a full TTL", len(recovered))
	}
	return err
}

// Serve answers RPCs on lis (and metrics on cfg.MetricsAddr) until ctx is
// done or Close is called.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	glog.Infof("nameserver serving on %s", lis.Addr())
	err := daemon.Serve(ctx, s.stopc, s.grpc, s.health, lis, s.cfg.MetricsAddr, s.metrics.registry)
	if err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	return nil
}

// Close stops serving, stops the session goroutine and closes the store.
// It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopc)
		s.grpc.Stop()
		<-s.livenessDone
		s.sessions.Close()
		s.repair.Close()
		s.stopCleaning()
		s.peers.Close()
		s.closeErr = s.ns.Close()
		if err := s.dataLock.Close(); s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// recover resumes, after a restart, what a crash left half done: files of
// ended sessions are closed, cleanings continue, locks of ended sessions
// are released.
func (s *Server) recover() error {
	if err := s.closer.Load(func(id string) bool { return s.sessions.Valid(session.ID(id)) }); err != nil {
		return err
	}
	return s.resumeLocks()
}
