// Package daemon holds what the nameserver and chunkserver do alike as
// gRPC daemons: serving with a graceful stop, an HTTP port (Prometheus
// metrics, and whatever page the daemon serves beside them), mutual TLS on
// both ports, and counting and timing their RPCs.
//
// With TLS (a daemon's Config.TLS) the gRPC port and the HTTP port both
// require a client certificate from the cluster's CA (internal/certs): the
// HTTP port serves HTTPS, and every request carries the client's identity
// in its context (certs.PeerIdentity), so a handler can refuse all but
// admins and nodes. Plain HTTP on loopback was the other choice; it was
// not taken because any local process could then read it, and the status
// page served on the same port shows holders and sessions. Without TLS
// (--insecure) both ports are plaintext and the daemon says so loudly in
// its log at start.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang/glog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// GracePeriod is how long RPCs in flight may finish when a daemon stops.
const GracePeriod = 2 * time.Second

// HTTPHandler is a daemon's HTTP port: Prometheus metrics from reg at
// /metrics and, unless page is nil, page at every other path.
func HTTPHandler(reg prometheus.Gatherer, page http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if page != nil {
		mux.Handle("/", page)
	}
	return mux
}

// Serve answers g's RPCs on lis, and web (HTTPHandler) at httpAddr unless
// httpAddr is "" (HTTPS requiring a client certificate with tlsCreds,
// plain HTTP with nil), until ctx is done, stop is closed or serving
// fails. It then marks h not serving, lets RPCs in flight finish for
// GracePeriod, cuts the rest, and returns. g must have been made with
// ServerOptions(tlsCreds).
func Serve(ctx context.Context, stop <-chan struct{}, g *grpc.Server, h *health.Server, lis net.Listener, httpAddr string, web http.Handler, tlsCreds *certs.Creds) error {
	if tlsCreds == nil {
		glog.Warningf("INSECURE: serving %s and its HTTP port in plaintext, with no authentication at all (--insecure): anyone who reaches the ports can read, change and delete everything", lis.Addr())
	} else {
		glog.Infof("mutual TLS with certificates from %s: this daemon is %s", tlsCreds.Dir(), tlsCreds.Identity())
	}
	var hlis net.Listener
	if httpAddr != "" {
		var err error
		if hlis, err = net.Listen("tcp", httpAddr); err != nil {
			lis.Close()
			return fmt.Errorf("HTTP listener: %w", err)
		}
	}
	errc := make(chan error, 2)
	go func() { errc <- g.Serve(lis) }()
	var hs *http.Server
	if hlis != nil {
		hs = &http.Server{Handler: certs.IdentifyHTTP(web), ReadHeaderTimeout: 10 * time.Second}
		scheme := "http"
		if tlsCreds != nil {
			hlis, scheme = tls.NewListener(hlis, tlsCreds.ServerConfig()), "https"
		}
		go func() { errc <- hs.Serve(hlis) }()
		glog.Infof("HTTP on %s://%s (metrics at /metrics)", scheme, hlis.Addr())
	}
	var err error
	select {
	case <-ctx.Done():
	case <-stop:
	case err = <-errc:
	}
	h.Shutdown()
	gracefulStop(g)
	if hs != nil {
		hs.Close()
	}
	if errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// ServerOptions are the first options of a daemon's gRPC server: mutual
// TLS with tlsCreds (plaintext with nil), and interceptors that put the
// client's verified identity in every RPC's context (certs.PeerIdentity)
// and, with TLS, refuse an RPC without one.
func ServerOptions(tlsCreds *certs.Creds) []grpc.ServerOption {
	secure := tlsCreds != nil
	return []grpc.ServerOption{
		grpc.Creds(certs.TransportCredentials(tlsCreds)),
		grpc.ChainUnaryInterceptor(certs.UnaryServerInterceptor(secure)),
		grpc.ChainStreamInterceptor(certs.StreamServerInterceptor(secure)),
	}
}

// CheckSecurity is a daemon's check of its configuration: TLS
// credentials, or Insecure said explicitly, never both.
func CheckSecurity(tlsCreds *certs.Creds, insecure bool) error {
	switch {
	case tlsCreds == nil && !insecure:
		return errors.New("no TLS certificates (give a certificates directory, or choose insecure explicitly)")
	case tlsCreds != nil && insecure:
		return errors.New("both TLS certificates and insecure")
	}
	return nil
}

func gracefulStop(g *grpc.Server) {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	t := time.NewTimer(GracePeriod)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		g.Stop()
		<-done
	}
}

// RPCMetrics counts RPCs by method and status code and times them by
// method.
type RPCMetrics struct {
	rpcs    *prometheus.CounterVec
	latency *prometheus.HistogramVec
	// untimed streams live as long as their client (a block write), so
	// their duration means nothing.
	untimed []string
	// methods holds a *methodMetrics per full method name, so that an RPC
	// finds its collectors with one lookup instead of hashing its label
	// values into both vectors.
	methods sync.Map
}

// methodMetrics are the collectors of one method.
type methodMetrics struct {
	name    string
	latency prometheus.Observer // nil for an untimed method
	// codes holds the rpcs counter per status code (an int32, or
	// transportError), filled as codes occur.
	codes sync.Map
}

// transportError is the codes key of RPCs that failed as gRPC errors.
const transportError = -1

// NewRPCMetrics registers prefix_rpcs_total and prefix_rpc_duration_seconds
// in reg. Methods named in untimed (streams that live as long as their
// client) are not timed.
func NewRPCMetrics(reg prometheus.Registerer, prefix string, untimed ...string) *RPCMetrics {
	m := &RPCMetrics{
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_rpcs_total",
			Help: "Unary RPCs answered, by method and status code.",
		}, []string{"method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "_rpc_duration_seconds",
			Help:    "Time to answer an RPC (a stream: its whole life), by method.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"method"}),
		untimed: untimed,
	}
	reg.MustRegister(m.rpcs, m.latency)
	return m
}

// statusCarrier is every response message of the protocol.
type statusCarrier interface{ GetStatus() bfspb.StatusCode }

func methodName(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

// method returns the collectors of fullMethod.
func (m *RPCMetrics) method(fullMethod string) *methodMetrics {
	if mm, ok := m.methods.Load(fullMethod); ok {
		return mm.(*methodMetrics)
	}
	mm := &methodMetrics{name: methodName(fullMethod)}
	if !slices.Contains(m.untimed, mm.name) {
		mm.latency = m.latency.WithLabelValues(mm.name)
	}
	actual, _ := m.methods.LoadOrStore(fullMethod, mm)
	return actual.(*methodMetrics)
}

// count counts one RPC of the method that ended with code.
func (m *RPCMetrics) count(mm *methodMetrics, code int32) {
	c, ok := mm.codes.Load(code)
	if !ok {
		label := "transport_error"
		if code != transportError {
			label = bfspb.StatusCode(code).String()
		}
		c, _ = mm.codes.LoadOrStore(code, m.rpcs.WithLabelValues(mm.name, label))
	}
	c.(prometheus.Counter).Inc()
}

// Unary is the server interceptor for unary RPCs.
func (m *RPCMetrics) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	mm := m.method(info.FullMethod)
	if mm.latency != nil {
		mm.latency.Observe(time.Since(start).Seconds())
	}
	code := int32(transportError)
	if r, ok := resp.(statusCarrier); ok && err == nil {
		code = int32(r.GetStatus())
	}
	m.count(mm, code)
	return resp, err
}

// Stream is the server interceptor for streaming RPCs.
func (m *RPCMetrics) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	if mm := m.method(info.FullMethod); mm.latency != nil {
		mm.latency.Observe(time.Since(start).Seconds())
	}
	return err
}
