package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/millis"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Session is a client's lease on the nameserver. Files open for write and
// directory locks belong to it; when it is lost they are released by the
// nameserver. A Session is safe for concurrent use.
type Session struct {
	id     string
	holder string
	ttl    time.Duration

	// stopCtx is cancelled to stop the keep-alive goroutine; it also
	// bounds that goroutine's RPCs.
	stopCtx context.Context
	stop    context.CancelFunc

	endOnce sync.Once
	done    chan struct{}
	err     error // set once, before done is closed

	mu struct {
		sync.Mutex
		// watch is the session's lock watch (see sessionWatch): started
		// by its first LockDir, shared by all its handles, and dropped
		// when it stops with the session (nil before and after). mu is
		// taken before the Client's.
		watch *sessionWatch
	}
}

func newSession(id, holder string, ttl time.Duration) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{
		id:      id,
		holder:  holder,
		ttl:     ttl,
		stopCtx: ctx,
		stop:    cancel,
		done:    make(chan struct{}),
	}
}

// ID returns the session id the nameserver issued.
func (s *Session) ID() string { return s.id }

// Holder returns the holder id recorded with the session.
func (s *Session) Holder() string { return s.holder }

// TTL returns the time-to-live the nameserver granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done returns a channel closed when the session is lost (the nameserver
// said it expired, or no renewal succeeded for nearly the TTL: before the
// nameserver would expire it) or closed with the Client.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session is live, then ErrSessionExpired if it
// was lost or ErrClosed if the Client closed it.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// end marks the session over for reason and stops its keep-alive.
func (s *Session) end(reason error) {
	s.stop()
	s.endOnce.Do(func() {
		s.err = reason
		close(s.done)
	})
}

// Session returns the client's live session, opening one if there is
// none yet or the last one was lost. Mutations call it for themselves; a
// caller needs it to watch for loss (Done) or to learn the session id.
func (c *Client) Session(ctx context.Context) (*Session, error) {
	if s, err := c.liveSession(); s != nil || err != nil {
		return s, err
	}
	select {
	case c.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("open session: %w", ctx.Err())
	}
	defer func() { <-c.opening }()
	if s, err := c.liveSession(); s != nil || err != nil {
		return s, err
	}
	s, err := c.openSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	return s, nil
}

// liveSession returns the current session if it is live, nil if there is
// none, and ErrClosed after Close.
func (c *Client) liveSession() (*Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	if s := c.mu.session; s != nil && s.Err() == nil {
		return s, nil
	}
	return nil, nil
}

// openSession opens a session and starts its keep-alive. The caller holds
// the opening semaphore.
func (c *Client) openSession(ctx context.Context) (*Session, error) {
	sent := c.clock.Now()
	resp, err := c.ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: c.holder, TtlMs: c.ttl.Milliseconds()})
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if err := responseError(resp); err != nil {
		return nil, err
	}
	ttl, err := grantedTTL(resp.GetTtlMs())
	if err != nil {
		// Keeping it alive on a TTL we cannot hold would be a guess: give
		// it back instead.
		c.closeSession(newSession(resp.GetSessionId(), c.holder, 0))
		return nil, err
	}
	s := newSession(resp.GetSessionId(), c.holder, cmp.Or(ttl, c.ttl))

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		// Close ran while the session was being opened; release it here,
		// as Close did not see it.
		c.closeSession(s)
		s.end(ErrClosed)
		return nil, ErrClosed
	}
	c.mu.session = s
	c.keepalives.Add(1)
	go c.keepAlive(s, sent)
	return s, nil
}

// keepAlive renews s every ttl/3 until s is stopped or lost. s is lost
// when the nameserver says it expired, or when no renewal has succeeded
// for nearly a whole TTL. The nameserver expires a session a TTL (the one
// it last granted) after it received the last renewal, which is after that
// renewal was sent; so a loss timer counting from the sending, a margin
// short of the TTL (lossAfter), declares the loss before the nameserver
// acts on it and can give the session's locks to another holder. Renewals
// run on goroutines of their own, so the timer fires on time however long
// one of them hangs in a partition.
func (c *Client) keepAlive(s *Session, lastOK time.Time) {
	defer c.keepalives.Done()
	var inflight sync.WaitGroup
	// Last to run: every way out has stopped s, which ends the renewal.
	defer inflight.Wait()
	ttl := s.ttl
	next := c.clock.NewTimer(c.until(lastOK.Add(ttl / 3)))
	defer next.Stop()
	lost := c.clock.NewTimer(c.until(lastOK.Add(lossAfter(ttl))))
	defer lost.Stop()
	// At most one renewal is in flight: next is re-armed by its result.
	results := make(chan renewal, 1)
	for {
		select {
		case <-s.stopCtx.Done():
			return
		case <-lost.C():
			c.lose(s, fmt.Errorf("no renewal succeeded since the one sent at %v (TTL %v)", lastOK, ttl))
			return
		case <-next.C():
			timeout := ttl / 3
			inflight.Go(func() { results <- c.renew(s, timeout) })
		case r := <-results:
			switch {
			case r.err == nil:
				lastOK, ttl = r.sent, cmp.Or(r.granted, ttl)
				lost.Reset(c.until(lastOK.Add(lossAfter(ttl))))
			case s.stopCtx.Err() != nil:
				return
			case errors.Is(r.err, ErrSessionExpired):
				c.lose(s, r.err)
				return
			default:
				glog.V(1).Infof("bfs sdk: keep-alive of session %s: %v", s.id, r.err)
			}
			// Counted from the sending, so a renewal that hung until its
			// timeout is followed by the next one at once.
			next.Reset(c.until(r.sent.Add(ttl / 3)))
		}
	}
}

// lossAfter is how long after the sending of its last successful renewal
// a session of this TTL is declared lost: the margin (a tenth of the TTL,
// at most a second) covers the nameserver's clock running a little faster
// than the client's.
func lossAfter(ttl time.Duration) time.Duration {
	return ttl - min(ttl/10, time.Second)
}

// until is the time left on the client's clock until t (<= 0 if past).
func (c *Client) until(t time.Time) time.Duration { return t.Sub(c.clock.Now()) }

// lose ends s as lost, unless it was stopped meanwhile: then Close (or
// another loss) is ending it, and the reason it gives stands.
func (c *Client) lose(s *Session, why error) {
	if s.stopCtx.Err() != nil {
		return
	}
	glog.V(1).Infof("bfs sdk: session %s lost: %v", s.id, why)
	s.end(ErrSessionExpired)
}

// renewal is the outcome of one KeepAlive.
type renewal struct {
	sent    time.Time
	granted time.Duration // 0 if the answer did not say
	err     error
}

// renew sends one KeepAlive, bounded by timeout on the client's clock.
func (c *Client) renew(s *Session, timeout time.Duration) renewal {
	r := renewal{sent: c.clock.Now()}
	ctx, cancel := c.withTimeout(s.stopCtx, timeout)
	defer cancel()
	resp, err := c.ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: s.id})
	if err == nil {
		err = responseError(resp)
	}
	if err != nil {
		r.err = err
		return r
	}
	r.granted, r.err = grantedTTL(resp.GetTtlMs())
	return r
}

// grantedTTL is the TTL a nameserver answer grants, 0 if it does not say.
// A negative TTL, or one a time.Duration cannot hold, is an error: the
// session's timers cannot follow it.
func grantedTTL(ms int64) (time.Duration, error) {
	ttl, ok := millis.Duration(ms)
	if !ok || ttl < 0 {
		return 0, fmt.Errorf("%w: nameserver granted a session TTL of %d ms", ErrInternal, ms)
	}
	return ttl, nil
}

// withTimeout is context.WithTimeout on the client's clock, so the
// timeouts of the SDK's own background calls follow a fake clock in tests
// like the timers they race with.
func (c *Client) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	t := c.clock.AfterFunc(d, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}
