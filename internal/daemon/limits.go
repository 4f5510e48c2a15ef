package daemon

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/limit"
)

// DefaultMaxMessageSize bounds every gRPC message a daemon receives or
// sends: gRPC's own default for what it receives, and what a client
// receives by default. The protocol is paged to fit it (block reports,
// listings, deletes); block data moves in packets of 256 KiB and read
// chunks of 1 MiB.
const DefaultMaxMessageSize = 4 << 20

// Limits counts a daemon's refusals by limit (internal/limit) in one
// counter, prefix_limit_refusals_total{limit}. Every limit the daemon
// has is created at zero, so a dashboard sees it before its first hit.
type Limits struct {
	refusals *prometheus.CounterVec
	counters map[limit.Name]prometheus.Counter // read-only after NewLimits
}

// NewLimits registers the refusal counter of the limits names in reg.
func NewLimits(reg prometheus.Registerer, prefix string, names ...limit.Name) *Limits {
	l := &Limits{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_limit_refusals_total",
			Help: "Requests and streams refused or ended by a limit (answered RESOURCE_EXHAUSTED), by limit.",
		}, []string{"limit"}),
		counters: make(map[limit.Name]prometheus.Counter, len(names)),
	}
	for _, n := range names {
		l.counters[n] = l.refusals.WithLabelValues(string(n))
	}
	reg.MustRegister(l.refusals)
	return l
}

// Count counts one refusal by the limit name, which must be one the
// Limits was made with.
func (l *Limits) Count(name limit.Name) {
	c, ok := l.counters[name]
	if !ok {
		panic(fmt.Sprintf("daemon: limit %q not declared in NewLimits", name))
	}
	c.Inc()
}

// End is the error a stream handler returns when the limit name ends or
// refuses its stream (ctx is the stream's): RESOURCE_EXHAUSTED with msg,
// and the limit in the stream's trailer (limit.Trailer). It counts the
// refusal, once: the message-size count leaves the stream out.
func (l *Limits) End(ctx context.Context, name limit.Name, msg string) error {
	l.Count(name)
	if m, ok := ctx.Value(rpcMarkKey{}).(*rpcMark); ok {
		m.counted.Store(true)
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(limit.Trailer, string(name))) // a stream that is gone has no one to tell
	return status.Error(codes.ResourceExhausted, msg)
}

// ServerOptions bound every message the server receives or sends to max
// bytes, and count those gRPC refuses (limit.MessageSize). gRPC answers
// a message over the bound RESOURCE_EXHAUSTED before any handler or
// interceptor sees it (a unary request is decoded before the unary
// interceptors run), so the count comes from a stats handler: every RPC
// that ends RESOURCE_EXHAUSTED and that End did not end. The daemons'
// own unary refusals travel in their answers' status, never as gRPC
// errors, so only gRPC's size checks end an RPC that way.
func (l *Limits) ServerOptions(max int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(max),
		grpc.MaxSendMsgSize(max),
		grpc.StatsHandler(sizeRefusals{l}),
	}
}

// sizeRefusals is the stats handler of ServerOptions.
type sizeRefusals struct{ l *Limits }

type rpcMarkKey struct{}

// rpcMark is an RPC's: set when End counted its refusal.
type rpcMark struct{ counted atomic.Bool }

func (h sizeRefusals) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, rpcMarkKey{}, &rpcMark{})
}

func (h sizeRefusals) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || status.Code(end.Error) != codes.ResourceExhausted {
		return
	}
	if m, ok := ctx.Value(rpcMarkKey{}).(*rpcMark); ok && m.counted.Load() {
		return
	}
	h.l.Count(limit.MessageSize)
}

func (sizeRefusals) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (sizeRefusals) HandleConn(context.Context, stats.ConnStats) {}

// IdleStreams ends the streams of some methods that wait longer than
// Timeout for a message from their client: the handler's RecvMsg
// returns, and the stream ends with End's error for Limit. The clock
// runs only while the handler waits in RecvMsg, so a handler slow to
// apply what it received (a slow disk) is never cut off for it. A
// message that arrives as the time runs out is dropped, never handed to
// the handler: either the handler has it, or the stream ends without it.
//
// gRPC gives a handler no way to stop its own RecvMsg: only the end of
// the stream does, and a stream ended by cancelling its context ends
// CANCELLED, whatever the handler returns. So each such stream has a
// reader goroutine that calls gRPC's RecvMsg for the handler, which
// waits for it or the timer; once the handler has returned, the end of
// the stream ends the reader's wait, and the reader.
type IdleStreams struct {
	// Methods are the full method names whose streams are watched.
	Methods []string
	Timeout time.Duration
	Clock   clock.Clock
	Limits  *Limits
	Limit   limit.Name
	// Message is the error message of an ended stream.
	Message string
}

// Interceptor is the stream interceptor that watches the streams.
func (i *IdleStreams) Interceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !slices.Contains(i.Methods, info.FullMethod) {
		return handler(srv, ss)
	}
	is := &idleStream{ServerStream: ss, timeout: i.Timeout, timer: i.Clock.NewTimer(i.Timeout),
		want: make(chan any), got: make(chan error, 1), done: make(chan struct{})}
	is.timer.Stop() // armed only while RecvMsg waits
	go is.read()
	defer is.timer.Stop()
	defer close(is.done)
	err := handler(srv, is)
	if is.idle {
		return i.Limits.End(ss.Context(), i.Limit, i.Message)
	}
	return err
}

// idleStream is a stream whose RecvMsg waits at most timeout.
type idleStream struct {
	grpc.ServerStream
	timeout time.Duration
	timer   clock.Timer
	// want hands the reader the message to receive into, got its
	// result; done ends the reader.
	want chan any
	got  chan error
	done chan struct{}
	// idle is set (by RecvMsg, on the handler's goroutine) once the time
	// ran out.
	idle bool
}

var errIdle = status.Error(codes.ResourceExhausted, "stream idle")

func (s *idleStream) RecvMsg(m any) error {
	if s.idle {
		return errIdle
	}
	s.want <- m // the reader waits for it: every result was taken
	s.timer.Reset(s.timeout)
	select {
	case err := <-s.got:
		s.timer.Stop()
		return err
	case <-s.timer.C():
		s.idle = true
		return errIdle
	}
}

// read receives for RecvMsg until the handler has returned.
func (s *idleStream) read() {
	for {
		select {
		case m := <-s.want:
			s.got <- s.ServerStream.RecvMsg(m) // room for one: RecvMsg took the last
		case <-s.done:
			return
		}
	}
}
