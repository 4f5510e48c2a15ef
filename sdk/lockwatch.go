package sdk

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/retry"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Backoff (jittered, see retry.New) between attempts to start a session's
// lock watch, and to look up the locks it could not.
const (
	watchRetryMin = 50 * time.Millisecond
	watchRetryMax = 2 * time.Second
)

// lockLookupTimeout bounds a lookup of a lock by a session's watch.
const lockLookupTimeout = 5 * time.Second

// sessionWatch is the one WatchDirLocks stream of a session, which the
// nameserver filters down to the ends of that session's locks; it closes
// the Done of the handles whose lock ended. A goroutine counted in the
// Client's lockWatches runs it from the session's first LockDir until the
// session stops (lost, or the Client closed), when every handle left is
// lost with it.
//
// No end can be missed: the first lock is asked for only once the
// nameserver has confirmed the stream (its response headers); an end that
// arrives before the answer granting its lock is kept for that answer (see
// expect); and after a broken stream is replaced, every handle looks its
// lock up.
type sessionWatch struct {
	c *Client
	s *Session

	mu struct {
		sync.Mutex
		// up says a confirmed stream is being received; gen counts the
		// changes of up, so a LockDir can tell whether the stream was up
		// all through its call.
		up  bool
		gen uint64
		// started is closed once the first stream is confirmed. Until
		// then attempt is settled (and replaced) after each failed try.
		started chan struct{}
		attempt *watchAttempt
		// stopped is set when the session stopped: a handle granted after
		// that is lost at once.
		stopped bool
		locks   map[string][]*Lock
		pending map[string]*pendingLocks
		// unchecked are the handles to look up (see recheck), by the
		// rechecker goroutine, which kick wakes. Each is marked with
		// the value of marks when it was last asked for: a lookup clears
		// only the mark it was made for, not one added meanwhile (after
		// another stream restart) that needs a lookup of its own.
		unchecked map[*Lock]uint64
		marks     uint64
	}
	kick chan struct{}
}

// watchAttempt is a try to start the stream: err is set before done
// closes.
type watchAttempt struct {
	done chan struct{}
	err  error
}

// pendingLocks are the LockDir calls of a path in flight, and the
// highest epoch seen ending at the path meanwhile.
type pendingLocks struct {
	n     int
	ended uint64
}

// sessionWatch returns the lock watch of s, starting it if needed, once
// its first stream is confirmed.
func (c *Client) sessionWatch(ctx context.Context, s *Session) (*sessionWatch, error) {
	w, err := c.watchOf(s)
	if err != nil {
		return nil, err
	}
	return w, w.await(ctx)
}

// watchOf returns the lock watch of s, starting it if s has none yet.
func (c *Client) watchOf(s *Session) (*sessionWatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.mu.watch; w != nil {
		return w, nil
	}
	if s.stopCtx.Err() != nil {
		// Its watch stopped with it, or would at once.
		return nil, c.sessionLost(s)
	}
	// Counted under c.mu, so Close (which sets closed first) waits for it.
	c.mu.Lock()
	closed := c.mu.closed
	if !closed {
		c.lockWatches.Add(1)
	}
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	w := &sessionWatch{c: c, s: s, kick: make(chan struct{}, 1)}
	w.mu.unchecked = make(map[*Lock]uint64)
	w.mu.started = make(chan struct{})
	w.mu.attempt = &watchAttempt{done: make(chan struct{})}
	w.mu.locks = make(map[string][]*Lock)
	w.mu.pending = make(map[string]*pendingLocks)
	s.mu.watch = w
	go w.run()
	return w, nil
}

// await returns once the first stream is confirmed, or with the error of
// the next failed try.
func (w *sessionWatch) await(ctx context.Context) error {
	w.mu.Lock()
	started, attempt := w.mu.started, w.mu.attempt
	w.mu.Unlock()
	select {
	case <-started:
		return nil
	default:
	}
	select {
	case <-started:
		return nil
	case <-attempt.done:
		return attempt.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run keeps a stream up until the session stops, with a rechecker beside
// it. Until the first stream is up, LockDir calls wait for each try:
// those are retried after the shortest delay, not backed off further.
func (w *sessionWatch) run() {
	defer w.c.lockWatches.Done()
	ctx := w.s.stopCtx
	var rechecker sync.WaitGroup
	rechecker.Go(func() { w.rechecks(ctx) })
	defer rechecker.Wait()
	// Before the rechecker is waited for: the handles are lost as soon
	// as the session is.
	defer w.stop()
	bo := retry.New(watchRetryMin, watchRetryMax)
	for {
		err := w.watchOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil: // it was up
			bo.Reset()
		case w.started():
			glog.V(1).Infof("bfs sdk: lock watch of session %s: %v", w.s.id, err)
		default: // a LockDir waits for each try
			bo.Reset()
		}
		if !retry.Sleep(ctx, w.c.clock, bo) {
			return
		}
	}
}

func (w *sessionWatch) started() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.mu.started:
		return true
	default:
		return false
	}
}

// watchOnce starts a stream and receives from it until it breaks. It
// returns nil if the stream was up, else why it could not start.
func (w *sessionWatch) watchOnce(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.open(ctx)
	if err != nil {
		w.failed(err)
		return err
	}
	if w.setUp(true) {
		w.uncheckAll()
	}
	err = w.receive(stream)
	w.setUp(false)
	if ctx.Err() == nil {
		glog.V(1).Infof("bfs sdk: lock watch of session %s broke: %v; watching anew", w.s.id, err)
	}
	return nil
}

// open starts a stream and waits for the nameserver to confirm it.
func (w *sessionWatch) open(ctx context.Context) (bfspb.NameServer_WatchDirLocksClient, error) {
	return w.c.openWatch(ctx, &bfspb.WatchDirLocksRequest{SessionId: w.s.id})
}

func (w *sessionWatch) receive(stream bfspb.NameServer_WatchDirLocksClient) error {
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		w.dispatch(ev)
	}
}

// failed settles the current try with err, until the first stream is up.
func (w *sessionWatch) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.mu.started:
		return
	default:
	}
	w.mu.attempt.err = err
	close(w.mu.attempt.done)
	w.mu.attempt = &watchAttempt{done: make(chan struct{})}
}

// setUp records whether a confirmed stream is being received. It reports
// whether a stream was up before this one: then the handles must look
// their locks up, as ends may have passed in between.
func (w *sessionWatch) setUp(up bool) (restarted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.up = up
	w.mu.gen++
	if !up {
		return false
	}
	select {
	case <-w.mu.started:
		return true
	default:
		close(w.mu.started)
		return false
	}
}

// uncheckAll has every handle looked up: a new stream replaced a broken
// one, and ends may have passed in between.
func (w *sessionWatch) uncheckAll() {
	w.mu.Lock()
	for _, ls := range w.mu.locks {
		for _, l := range ls {
			w.markLocked(l)
		}
	}
	w.mu.Unlock()
	w.wake()
}

// uncheck has l looked up, unless it was dropped meanwhile (lost).
func (w *sessionWatch) uncheck(l *Lock) {
	w.mu.Lock()
	held := slices.Contains(w.mu.locks[l.path], l)
	if held {
		w.markLocked(l)
	}
	w.mu.Unlock()
	if held {
		w.wake()
	}
}

func (w *sessionWatch) markLocked(l *Lock) {
	w.mu.marks++
	w.mu.unchecked[l] = w.mu.marks
}

func (w *sessionWatch) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// rechecks looks up the unchecked handles until ctx (the session) ends,
// retrying with backoff those it could not. It runs beside the stream, so
// a lookup that keeps failing never holds up the events of other locks.
func (w *sessionWatch) rechecks(ctx context.Context) {
	again := w.c.clock.NewTimer(watchRetryMax)
	defer again.Stop()
	again.Stop() // armed only while some lookup has to be tried again
	bo := retry.New(watchRetryMin, watchRetryMax)
	for {
		if w.recheckUnchecked(ctx) {
			again.Stop()
			bo.Reset()
		} else {
			again.Reset(bo.NextBackOff())
		}
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-again.C():
		}
	}
}

// recheckUnchecked looks the unchecked handles up once and reports
// whether none is left.
func (w *sessionWatch) recheckUnchecked(ctx context.Context) bool {
	w.mu.Lock()
	todo := maps.Clone(w.mu.unchecked)
	w.mu.Unlock()
	for l, mark := range todo {
		if w.recheck(ctx, l) {
			w.mu.Lock()
			if w.mu.unchecked[l] == mark {
				delete(w.mu.unchecked, l)
			}
			w.mu.Unlock()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.unchecked) == 0
}

// recheck is l.recheck bounded on the client's clock, so one lookup that
// hangs (a nameserver out of reach) does not hold up the others for long.
func (w *sessionWatch) recheck(ctx context.Context, l *Lock) bool {
	ctx, cancel := w.c.withTimeout(ctx, lockLookupTimeout)
	defer cancel()
	return l.recheck(ctx)
}

// dispatch closes the handles an event ends: those of its path at its
// epoch or an older one (an end of a newer lock of the path ends any
// older one too).
func (w *sessionWatch) dispatch(ev *bfspb.DirLockEvent) {
	d := ev.GetLock()
	if d == nil || d.SessionId != w.s.id || d.Status == bfspb.LockStatus_LOCK_STATUS_LOCKED {
		return
	}
	w.mu.Lock()
	if p := w.mu.pending[d.Path]; p != nil {
		p.ended = max(p.ended, d.Epoch)
	}
	var lost []*Lock
	for _, l := range w.mu.locks[d.Path] {
		if l.epoch <= d.Epoch {
			lost = append(lost, l)
		}
	}
	w.mu.Unlock()
	// Let go by this client (an unlock or a delete it has in flight): no
	// fence. Not the event's reason: "holder" says which session, not
	// which process, and a session id may be known to another.
	released := w.c.fences.ownEnd(d.Path)
	for _, l := range lost {
		l.end(fmt.Errorf("%w: %s %s (%s)", ErrLockLost, d.Path, lockStatusFromWire(d.Status), ev.Reason), released)
	}
}

// expect notes a LockDir of path about to be sent; settle must follow. It
// returns the stream generation to pass to settle.
func (w *sessionWatch) expect(path string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.mu.pending[path]
	if p == nil {
		p = &pendingLocks{}
		w.mu.pending[path] = p
	}
	p.n++
	return w.mu.gen
}

// settle ends a LockDir of path that expect noted, registering its handle
// l (nil if no lock was granted). It reports whether l must look its lock
// up: the stream was not up all through the call, so its end may have
// passed unseen.
func (w *sessionWatch) settle(path string, gen uint64, l *Lock) (recheck bool) {
	w.mu.Lock()
	p := w.mu.pending[path]
	ended := p.ended
	if p.n--; p.n == 0 {
		delete(w.mu.pending, path)
	}
	if l == nil {
		w.mu.Unlock()
		return false
	}
	stopped, gone := w.mu.stopped, ended >= l.epoch
	if !stopped && !gone {
		w.mu.locks[path] = append(w.mu.locks[path], l)
	}
	recheck = !stopped && !gone && gen != w.mu.gen
	w.mu.Unlock()
	switch {
	case stopped:
		l.lose(w.c.sessionLost(w.s))
	case gone:
		l.lose(fmt.Errorf("%w: %s unlocked as it was granted", ErrLockLost, path))
	}
	return recheck
}

// forget drops l's handle.
func (w *sessionWatch) forget(l *Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.mu.unchecked, l)
	ls := w.mu.locks[l.path]
	i := slices.Index(ls, l)
	if i < 0 {
		return
	}
	if len(ls) == 1 {
		delete(w.mu.locks, l.path)
		return
	}
	w.mu.locks[l.path] = slices.Delete(ls, i, i+1)
}

// stop ends the watch with its session: every handle left is lost.
func (w *sessionWatch) stop() {
	w.s.mu.Lock()
	if w.s.mu.watch == w {
		w.s.mu.watch = nil
	}
	w.s.mu.Unlock()
	why := w.c.sessionLost(w.s)
	w.mu.Lock()
	w.mu.stopped = true
	select {
	case <-w.mu.started:
	default:
		w.mu.attempt.err = why
		close(w.mu.attempt.done)
	}
	var lost []*Lock
	for _, ls := range w.mu.locks {
		lost = append(lost, ls...)
	}
	w.mu.Unlock()
	for _, l := range lost {
		l.lose(why)
	}
}

// sessionLost is why the handles of s, stopped, are lost.
func (c *Client) sessionLost(s *Session) error {
	why := s.Err()
	switch {
	case why != nil:
	case c.checkOpen() != nil:
		why = ErrClosed
	default:
		why = ErrSessionExpired
	}
	return fmt.Errorf("%w: session lost: %w", ErrLockLost, why)
}
