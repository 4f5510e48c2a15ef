// Package nsgroup is a client's connection to a nameserver group: one
// grpc.ClientConnInterface over the connections to every nameserver,
// which sends each call to the leader and follows leadership as it moves.
//
// A call goes to the nameserver last known to lead. A member that does
// not lead answers NOT_LEADER (nothing applied) and names the leader's
// client address in a trailer; the call is sent there at once, dialing
// it if it is not in the list (a member added later). A member that names
// no leader (an election under way, or no majority), or one that cannot
// be reached before the call is sent, makes the call try the next member,
// with a jittered backoff after each round, until the call's context ends
// or Config.Patience has passed; then it fails with UNAVAILABLE. A round
// in which no member could be reached at all fails the call at once,
// UNAVAILABLE (nothing was sent, and nobody is there to elect a leader).
// A call whose outcome is unknown because the transport failed once it was sent
// is retried only if its method is in Config.Idempotent; otherwise its
// caller decides. An answer is the caller's, whatever its status (a
// nameserver's UNAVAILABLE included), but NOT_LEADER. A member that held
// a call until its time ran out (paused or stuck, its connection up) is
// passed over: the next call tries the next member first, not it again.
//
// Streams are opened on the leader the same way; a stream that fails
// later is its caller's to open again.
//
// Conn is safe for concurrent use. Close closes every connection.
package nsgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// LeaderTrailer is the trailer in which a nameserver that does not lead
// names the leader's client address.
const LeaderTrailer = "bfs-leader"

// DefaultPatience is how long a call keeps looking for a leader: longer
// than an election with the default timings.
const DefaultPatience = 10 * time.Second

// The pause after a round of the members in which none led grows from
// searchPauseMin to searchPauseMax (jittered, see retry.New). The cap
// bounds how long after a new leader takes office a call still waits
// before it asks again: with the default timings an election takes from
// 0.5 to 1 s after the leader's death, and a pause that doubled up to a
// second added as much again to the failover a client saw (bfsbench ha:
// the first LockDir came 0.2 to 1.2 s after the new leader was elected).
// A round asks each member once, so a client sends at most a few cheap
// calls per pause while there is no leader.
const (
	searchPauseMin = 50 * time.Millisecond
	searchPauseMax = 250 * time.Millisecond
)

// Config configures a Conn.
type Config struct {
	// Addrs are the nameservers' client addresses, as given (at least one).
	Addrs []string
	// DialOptions are used for every connection.
	DialOptions []grpc.DialOption
	// Idempotent lists the full method names ("/bfs.NameServer/Stat")
	// whose calls may be sent again when their outcome is unknown.
	Idempotent map[string]bool
	// Patience bounds how long a call looks for a leader; 0 means
	// DefaultPatience.
	Patience time.Duration
}

// Conn is a connection to a nameserver group. See the package
// documentation.
type Conn struct {
	cfg Config
	mu  struct {
		sync.Mutex
		addrs  []string
		conns  map[string]*grpc.ClientConn
		leader string
		closed bool
	}
}

var _ grpc.ClientConnInterface = (*Conn)(nil)

// ParseAddrs splits a comma-separated list of nameserver addresses,
// refusing an empty one or an empty entry.
func ParseAddrs(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("no nameserver address")
	}
	var out []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("nameserver list %q has an empty address", list)
		}
		out = append(out, a)
	}
	return out, nil
}

// New returns a Conn to the group. It connects lazily.
func New(cfg Config) (*Conn, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("nsgroup: no nameserver address")
	}
	if cfg.Patience == 0 {
		cfg.Patience = DefaultPatience
	}
	c := &Conn{cfg: cfg}
	c.mu.addrs = append([]string(nil), cfg.Addrs...)
	c.mu.conns = make(map[string]*grpc.ClientConn)
	c.mu.leader = cfg.Addrs[0]
	return c, nil
}

// Leader returns the address calls go to first.
func (c *Conn) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.leader
}

// Close closes every connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	var errs []error
	for _, cc := range c.mu.conns {
		errs = append(errs, cc.Close())
	}
	c.mu.conns = nil
	return errors.Join(errs...)
}

// conn returns the connection to addr, dialing it if needed.
func (c *Conn) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, status.Error(codes.Canceled, "nsgroup: connection closed")
	}
	if cc := c.mu.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, c.cfg.DialOptions...)
	if err != nil {
		return nil, fmt.Errorf("nsgroup: dial %s: %w", addr, err)
	}
	c.mu.conns[addr] = cc
	return cc, nil
}

// redial replaces the connection to addr, old, which failed, by a new
// one. A failed connection is dialed again only after gRPC's reconnect
// backoff, which grows to two minutes, and reports the old failure until
// then (its state stays TRANSIENT_FAILURE while it tries); a member that
// was down a moment ago may be back, and lead. A new connection dials at
// once, and its state tells whether that dial failed. Nothing is under way
// on a failed connection, so closing it cuts nothing short.
func (c *Conn) redial(addr string, old *grpc.ClientConn) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, status.Error(codes.Canceled, "nsgroup: connection closed")
	}
	if cur := c.mu.conns[addr]; cur != old || old.GetState() != connectivity.TransientFailure {
		// Another call redialed it already, or it has a transport again:
		// a call may have been sent on it, which closing would cut off.
		return cur, nil
	}
	cc, err := grpc.NewClient(addr, c.cfg.DialOptions...)
	if err != nil {
		return nil, fmt.Errorf("nsgroup: dial %s: %w", addr, err)
	}
	c.mu.conns[addr] = cc
	old.Close()
	return cc, nil
}

// follow makes addr the leader calls go to first, adding it to the list
// if it is new.
func (c *Conn) follow(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.leader = addr
	for _, a := range c.mu.addrs {
		if a == addr {
			return
		}
	}
	c.mu.addrs = append(c.mu.addrs, addr)
}

// next returns the member after addr in the list.
func (c *Conn) next(addr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range c.mu.addrs {
		if a == addr {
			return c.mu.addrs[(i+1)%len(c.mu.addrs)]
		}
	}
	return c.mu.addrs[0]
}

func (c *Conn) members() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.addrs)
}

// Invoke sends a unary call to the leader (see the package
// documentation).
func (c *Conn) Invoke(parent context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithTimeout(parent, c.cfg.Patience)
	defer cancel()
	backoff := retry.New(searchPauseMin, searchPauseMax)
	addr := c.Leader()
	// unreached holds the members found unreachable since one was last
	// reached; tried counts the moves to the next member.
	unreached := make(map[string]bool)
	tried := 0
	for {
		hint, err := c.invokeOn(ctx, addr, method, args, reply, opts)
		if ns := (errNotSent{}); errors.As(err, &ns) {
			unreached[addr] = true
		} else {
			clear(unreached)
		}
		// The member held the call until time ran out (it is paused, or
		// stuck, with its connection up; the deadline may have ended the
		// call on its side first): the next call tries another first, or
		// it would wait on it again, and again.
		timedOut := err != nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded)
		if timedOut {
			c.Skip(addr)
		}
		switch {
		case err == nil && hint == "":
			return nil
		case err == nil && hint != addr:
			c.follow(hint)
			addr = hint
			continue
		case parent.Err() != nil:
			return status.FromContextError(parent.Err()).Err()
		case ctx.Err() != nil:
			// Patience ran out, perhaps with the call under way: UNAVAILABLE
			// (not applied, or the outcome unknown), never the deadline of a
			// context the caller did not set.
			return status.Errorf(codes.Unavailable, "no nameserver of %v leads (last: %v)", c.cfg.Addrs, errOrNotLeader(err))
		case err != nil && !c.retryable(method, err):
			return err
		}
		// No leader named, or the member cannot be reached: the next one,
		// and a pause after each round. A round in which no member could
		// be reached at all ends the call: nothing was sent, and nobody
		// is there to elect a leader.
		addr = c.next(addr)
		tried++
		if tried%c.members() != 0 {
			continue
		}
		if len(unreached) >= c.members() {
			return status.Errorf(codes.Unavailable, "no nameserver of %v could be reached (last: %v)", c.cfg.Addrs, err)
		}
		if !retry.Sleep(ctx, clock.Real{}, backoff) {
			if parent.Err() != nil {
				return status.FromContextError(parent.Err()).Err()
			}
			return status.Errorf(codes.Unavailable, "no nameserver of %v leads (last: %v)", c.cfg.Addrs, errOrNotLeader(err))
		}
	}
}

func errOrNotLeader(err error) error {
	if err == nil {
		return errors.New("NOT_LEADER, naming no leader")
	}
	return err
}

// invokeOn sends the call to addr. It returns the leader's address if
// the answer was NOT_LEADER ("" otherwise, and addr itself if it named
// none, so the caller moves on).
func (c *Conn) invokeOn(ctx context.Context, addr, method string, args, reply any, opts []grpc.CallOption) (string, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return "", err
	}
	down, err := c.connect(ctx, cc)
	if err == nil && down {
		// It failed before, perhaps long ago: try now (see redial).
		if cc, err = c.redial(addr, cc); err != nil {
			return "", err
		}
		down, err = c.connect(ctx, cc)
	}
	if err != nil {
		return "", errNotSent{addr, err}
	}
	var md metadata.MD
	err = cc.Invoke(ctx, method, args, reply, append(opts, grpc.Trailer(&md))...)
	if down && status.Code(err) == codes.Unavailable {
		// Failed fast on a connection that could not be made: not sent.
		return "", errNotSent{addr, err}
	}
	if err != nil && ctx.Err() == nil && c.closedUnder(addr, cc, err) {
		// Another call found the connection failed and redialed: a call
		// that had not reached the failed transport yet was cut off
		// before it was sent (one that had fails UNAVAILABLE).
		return "", errNotSent{addr, err}
	}
	if err != nil {
		return "", err
	}
	if r, ok := reply.(interface{ GetStatus() bfspb.StatusCode }); ok && r.GetStatus() == bfspb.StatusCode_NOT_LEADER {
		if l := md.Get(LeaderTrailer); len(l) > 0 && l[0] != "" {
			return l[0], nil
		}
		return addr, nil
	}
	return "", nil
}

// connectTimeout bounds the wait for a connection to a member before a
// call moves on to the next one.
const connectTimeout = 2 * time.Second

// connect waits (for connectTimeout at most) until cc is connected. It
// reports down if the connection failed (a call then fails fast, unsent,
// saying why), and an error if it neither connected nor failed in time.
func (c *Conn) connect(ctx context.Context, cc *grpc.ClientConn) (down bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	for {
		switch st := cc.GetState(); st {
		case connectivity.Ready:
			return false, nil
		case connectivity.TransientFailure:
			return true, nil
		case connectivity.Shutdown:
			return false, errors.New("connection closed")
		case connectivity.Idle:
			cc.Connect()
			fallthrough
		default:
			if !cc.WaitForStateChange(ctx, st) {
				return false, fmt.Errorf("no connection within %v", connectTimeout)
			}
		}
	}
}

// closedUnder reports whether err is gRPC's answer to a call on cc, the
// connection to addr, closed under it by a redial: CANCELED, while the
// call's context is not (the caller checks that), and cc replaced.
func (c *Conn) closedUnder(addr string, cc *grpc.ClientConn, err error) bool {
	if status.Code(err) != codes.Canceled {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mu.closed && c.mu.conns[addr] != cc
}

// errNotSent: the call did not reach addr.
type errNotSent struct {
	addr string
	err  error
}

func (e errNotSent) Error() string {
	return fmt.Sprintf("nameserver %s unreachable: %s", e.addr, status.Convert(e.err).Message())
}

// retryable reports whether a failed call may go to another member: it
// was not sent, or it may be sent twice.
func (c *Conn) retryable(method string, err error) bool {
	var ns errNotSent
	if errors.As(err, &ns) {
		return true
	}
	return status.Code(err) == codes.Unavailable && c.cfg.Idempotent[method]
}

// NewStream opens a stream on the leader. A member that does not lead
// ends the stream at once with UNAVAILABLE, naming the leader in the
// trailer: the stream is opened there. Errors after the stream is
// established are the caller's.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	addr := c.Leader()
	cc, err := c.conn(addr)
	if err == nil && cc.GetState() == connectivity.TransientFailure {
		cc, err = c.redial(addr, cc)
	}
	if err != nil {
		return nil, err
	}
	return cc.NewStream(ctx, desc, method, opts...)
}

// FollowTrailer follows the leader a stream's trailer names (after the
// stream ended with an error); it reports whether it named one.
func (c *Conn) FollowTrailer(md metadata.MD) bool {
	if l := md.Get(LeaderTrailer); len(l) > 0 && l[0] != "" {
		c.follow(l[0])
		return true
	}
	return false
}

// Skip moves calls on from addr to the next member (a stream found addr
// unreachable, or not leading and naming no leader).
func (c *Conn) Skip(addr string) {
	next := c.next(addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.leader == addr {
		c.mu.leader = next
	}
}
