package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"

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

// Done returns a channel closed when the session is lost (expired, or the
// keep-alive failed for longer than the TTL) or closed with the Client.
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
	ttl := c.ttl
	if resp.GetTtlMs() > 0 {
		ttl = time.Duration(resp.GetTtlMs()) * time.Millisecond
	}
	s := newSession(resp.GetSessionId(), c.holder, ttl)

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
// for nearly a whole TTL: the nameserver expires a session a TTL after it
// received the last renewal, which is after it was sent, so counting from
// the sending, on a timer of its own, declares the loss before the
// nameserver acts on it (a little before, for clocks that run apart),
// however long a renewal hangs in a partition.
func (c *Client) keepAlive(s *Session, lastOK time.Time) {
	defer c.keepalives.Done()
	ttl := s.ttl
	t := c.clock.NewTimer(ttl / 3)
	defer t.Stop()
	lost := c.clock.NewTimer(lossAfter(ttl))
	defer lost.Stop()
	for {
		select {
		case <-s.stopCtx.Done():
			return
		case <-lost.C():
			c.lose(s, errors.New("no renewal succeeded for a TTL"))
			return
		case <-t.C():
		}
		sent := c.clock.Now()
		granted, err := c.renew(s, min(ttl/3, lastOK.Add(lossAfter(ttl)).Sub(sent)))
		switch {
		case err == nil:
			lastOK = sent
			if granted > 0 {
				ttl = granted
			}
			lost.Reset(lastOK.Add(lossAfter(ttl)).Sub(c.clock.Now()))
		case s.stopCtx.Err() != nil:
			return
		case errors.Is(err, ErrSessionExpired) || !c.clock.Now().Before(lastOK.Add(lossAfter(ttl))):
			c.lose(s, err)
			return
		default:
			glog.V(1).Infof("bfs sdk: keep-alive of session %s: %v", s.id, err)
		}
		t.Reset(ttl / 3)
	}
}

// lossAfter is how long after the sending of its last successful renewal
// a session of this TTL is declared lost: lossMargin (a tenth of it, at
// most a second) before the nameserver would expire it.
func lossAfter(ttl time.Duration) time.Duration {
	return ttl - min(ttl/10, time.Second)
}

func (c *Client) lose(s *Session, why error) {
	glog.V(1).Infof("bfs sdk: session %s lost: %v", s.id, why)
	s.end(ErrSessionExpired)
}

// renew sends one KeepAlive and returns the TTL granted (0 if the answer
// did not say).
func (c *Client) renew(s *Session, timeout time.Duration) (time.Duration, error) {
	// Bounded on the client's clock, like the loss it must not outlast.
	ctx, cancel := context.WithCancel(s.stopCtx)
	defer cancel()
	bound := c.clock.AfterFunc(timeout, cancel)
	defer bound.Stop()
	resp, err := c.ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: s.id})
	if err != nil {
		return 0, err
	}
	if err := responseError(resp); err != nil {
		return 0, err
	}
	return time.Duration(resp.GetTtlMs()) * time.Millisecond, nil
}
