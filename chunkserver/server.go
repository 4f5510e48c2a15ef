package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/golang/glog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/internal/nsgroup"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// ErrClosed is returned by Serve after Close, or when it is called twice.
var ErrClosed = errors.New("chunkserver: closed or already serving")

// Server is a chunkserver. See the package documentation.
type Server struct {
	bfspb.UnimplementedChunkServerServer

	cfg     Config
	vols    *volume.Set
	cluster *cluster
	metrics *metrics
	codec   packetCodec
	grpc    *grpc.Server
	health  *health.Server

	// Nil when the chunkserver runs without a nameserver.
	nsConn   *nsgroup.Conn
	member   *membership
	reporter *reporter
	bad      *badReporter
	// One per volume; none when ScrubRate is 0.
	scrubs []*scrubber
	// copies carries out ReplicateBlock, yielding to clients.
	copies  *copier
	clients *clients

	// keys are the block-token keys the nameserver handed out (trust.go).
	keys *blocktoken.Keyring

	// writers counts the write streams open.
	writers atomic.Int64
	// streams numbers the write streams: a stream's packets carry its
	// number as their blockstore.WriterID.
	streams atomic.Uint64

	stopc   chan struct{}
	serving sync.WaitGroup // Serve calls in progress
	mu      struct {
		sync.Mutex
		closed, served bool
	}
	closeOnce sync.Once
	closeErr  error
}

// Flow-control window and socket buffer sizes of the data streams.
const (
	streamWindow = 16 << 20
	ioBuffer     = 1 << 20
)

// New opens the chunkserver's volumes and recovers their replicas. It
// neither listens nor contacts the nameserver: Serve does.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, stopc: make(chan struct{}), clients: &clients{clock: cfg.Clock}, keys: blocktoken.NewKeyring(cfg.Clock)}
	if cfg.TLS != nil && cfg.TLS.Identity().Role == 0 {
		glog.Warningf("chunkserver: its certificate (%s) was made before node roles: make one with bfs cert create-node --role chunkserver", cfg.TLS.Identity())
	}
	s.copies = newCopier(cfg.MaxCopies, cfg.CopyRate, s.clients, cfg.TLS)
	vols, err := volume.Open(volume.Config{
		Dirs: cfg.volumes(), FailedTolerated: cfg.FailedVolumesTolerated, Clock: cfg.Clock,
		DiskSpace: cfg.TestingKnobs.DiskSpace, CheckInterval: cfg.TestingKnobs.VolumeCheckInterval, CheckTimeout: cfg.VolumeCheckTimeout,
		OnChange: s.volumeChanged, TestingKnobs: volume.TestingKnobs{Fault: cfg.TestingKnobs.VolumeFault},
	})
	if err != nil {
		return nil, fmt.Errorf("chunkserver: %w", err)
	}
	s.vols = vols
	if s.cluster, err = loadCluster(vols); err != nil {
		vols.Close()
		return nil, err
	}
	pool := &bufPool{}
	s.codec = newPacketCodec(pool, cfg.TestingKnobs.WritePacket)
	s.metrics = newMetrics(gauges{
		blocks:       func() float64 { n, _ := vols.Usage(); return float64(n) },
		bytes:        func() float64 { _, n := vols.Usage(); return float64(n) },
		writeStreams: func() float64 { return float64(s.writers.Load()) },
		copies:       func() float64 { return float64(s.copies.inFlight()) },
	}, vols)
	if err := s.dialNameServer(); err != nil {
		vols.Close()
		return nil, err
	}
	if cfg.ScrubRate > 0 {
		for _, v := range vols.Volumes() {
			if v.Failed() {
				continue
			}
			sc := &scrubber{vol: v, vols: vols, clock: cfg.Clock, metrics: s.metrics, dataDir: v.Dir(), rate: cfg.ScrubRate}
			if s.bad != nil {
				sc.corrupt = s.bad.add
			}
			s.scrubs = append(s.scrubs, sc)
		}
	}
	idle := &daemon.IdleStreams{
		Methods: []string{bfspb.ChunkServer_Write_FullMethodName},
		Timeout: cfg.WriteIdleTimeout, Clock: cfg.Clock, Limits: s.metrics.limits, Limit: limit.WriteIdle,
		Message: fmt.Sprintf("write stream idle for %v without a packet (--write-idle-timeout): ended; write on a new stream", cfg.WriteIdleTimeout),
	}
	opts := append(daemon.ServerOptions(cfg.TLS), s.metrics.limits.ServerOptions(cfg.MaxMessageSize)...)
	s.grpc = grpc.NewServer(append(opts,
		grpc.ChainUnaryInterceptor(s.metrics.rpcs.Unary),
		grpc.ChainStreamInterceptor(s.metrics.rpcs.Stream, idle.Interceptor),
		grpc.WaitForHandlers(true),
		// Block data moves in large streams: wide flow-control windows
		// and buffers keep a stream from stalling on window updates.
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(streamWindow),
		grpc.WriteBufferSize(ioBuffer),
		grpc.ReadBufferSize(ioBuffer),
		// Packets are decoded with one copy of their data (codec.go),
		// into buffers that are not cleared first (bufpool.go).
		grpc.ForceServerCodecV2(s.codec),
		experimental.BufferPool(pool),
	)...)
	bfspb.RegisterChunkServerServer(s.grpc, s)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus(bfspb.ChunkServer_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(s.grpc)
	blocks, bytes := vols.Usage()
	glog.Infof("chunkserver recovered %d blocks (%d bytes) from %s", blocks, bytes, strings.Join(cfg.volumes(), ", "))
	return s, nil
}

// volumeChanged tells the nameserver at once that a volume changed state.
func (s *Server) volumeChanged() {
	if m := s.member; m != nil {
		m.kickHeartbeat()
	}
}

// Volumes describes the chunkserver's volumes.
func (s *Server) Volumes() []volume.Status { return s.vols.Status() }

// idempotentCalls are the chunkserver's calls to the nameserver that may
// be sent again when their outcome is unknown (a leader change): each
// says what is, not what to do.
var idempotentCalls = map[string]bool{
	"/bfs.NameServer/HeartBeat":         true,
	"/bfs.NameServer/BlockReceived":     true,
	"/bfs.NameServer/ReportBadReplicas": true,
}

// dialNameServer prepares (without connecting) the client of the
// nameserver group: calls go to its leader.
func (s *Server) dialNameServer() error {
	if s.cfg.NameServerAddr == "" {
		return nil
	}
	addrs, err := nsgroup.ParseAddrs(s.cfg.NameServerAddr)
	if err != nil {
		return fmt.Errorf("chunkserver: --nameserver: %w", err)
	}
	conn, err := nsgroup.New(nsgroup.Config{
		Addrs:       addrs,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(certs.TransportCredentials(s.cfg.TLS))},
		Idempotent:  idempotentCalls,
	})
	if err != nil {
		return fmt.Errorf("chunkserver: nameserver address: %w", err)
	}
	ns := bfspb.NewNameServerClient(conn)
	s.nsConn = conn
	s.member = &membership{
		ns: ns, vols: s.vols, cluster: s.cluster, clock: s.cfg.Clock, metrics: s.metrics, keys: s.keys,
		hostID: s.cfg.HostID, page: s.cfg.TestingKnobs.ReportPage,
		writers: s.writers.Load, hb: s.cfg.HeartbeatInterval, reports: s.cfg.ReportInterval,
		registered: make(chan struct{}), kick: make(chan struct{}, 1),
	}
	s.reporter = newReporter(ns, s.member, s.cfg.Clock, s.metrics)
	s.bad = newBadReporter(ns, s.member, s.cfg.Clock)
	return nil
}

// Serve answers RPCs on lis (and metrics on cfg.MetricsAddr), registers
// with the nameserver and keeps it informed, until ctx is done or Close is
// called. A Server serves once. Serve closes lis.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if err := s.startServing(); err != nil {
		lis.Close()
		return err
	}
	defer s.serving.Done()
	ctx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer bg.Wait() // after cancel: defers run last-in first-out
	defer cancel()
	s.startNameServerLoops(ctx, &bg, lis.Addr().String())
	for _, sc := range s.scrubs {
		bg.Go(func() { sc.run(ctx) })
	}
	// Too many failed volumes stop the chunkserver.
	var fatal error
	fatalc := make(chan struct{})
	bg.Go(func() {
		select {
		case fatal = <-s.vols.Fatal():
			glog.Errorf("chunkserver: %v", fatal)
			close(fatalc)
			cancel()
		case <-ctx.Done():
		}
	})
	glog.Infof("chunkserver serving on %s", lis.Addr())
	if err := daemon.Serve(ctx, s.stopc, s.grpc, s.health, lis, s.cfg.MetricsAddr, s.HTTPHandler(), s.cfg.TLS); err != nil {
		return fmt.Errorf("chunkserver: %w", err)
	}
	select {
	case <-fatalc:
		return fmt.Errorf("chunkserver: %w", fatal)
	default:
	}
	return nil
}

// HTTPHandler serves the chunkserver's HTTP port (Prometheus metrics at
// /metrics), for Serve at cfg.MetricsAddr or for a caller with a listener
// of its own (the sandbox).
func (s *Server) HTTPHandler() http.Handler { return daemon.HTTPHandler(s.metrics.registry, nil) }

func (s *Server) startServing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || s.mu.served {
		return ErrClosed
	}
	s.mu.served = true
	s.serving.Add(1)
	return nil
}

// startNameServerLoops starts registration, heartbeats and reports.
func (s *Server) startNameServerLoops(ctx context.Context, bg *sync.WaitGroup, listenAddr string) {
	if s.member == nil {
		glog.Warningf("no nameserver configured: serving blocks without registering")
		return
	}
	s.member.addr = s.cfg.AdvertiseAddr
	if s.member.addr == "" {
		s.member.addr = listenAddr
	}
	bg.Go(func() { s.member.run(ctx) })
	bg.Go(func() { s.reporter.run(ctx) })
	bg.Go(func() { s.bad.run(ctx) })
}

// Close stops serving and every goroutine the server started, then closes
// the block store. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.mu.Unlock()
		close(s.stopc)
		s.grpc.Stop()
		s.serving.Wait()
		var errs []error
		if s.nsConn != nil {
			errs = append(errs, s.nsConn.Close())
		}
		s.copies.peers.Close()
		errs = append(errs, s.vols.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
