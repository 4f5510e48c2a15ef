package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// DirLock is the state of a directory lock as the nameserver reports it.
type DirLock struct {
	Path      string
	Status    LockStatus
	Holder    string
	SessionID string
	Epoch     uint64
	// Since is when the directory entered its status; zero if unknown.
	Since time.Time
	// Pending lists, while the lock is cleaning, the files still being
	// sealed and the replicas that have not confirmed yet.
	Pending []PendingFile
}

// PendingFile is a file a cleaning still waits for.
type PendingFile struct {
	Path     string
	BlockID  int64
	Replicas []string
}

func lockStatusFromWire(s bfspb.LockStatus) LockStatus {
	switch s {
	case bfspb.LockStatus_LOCK_STATUS_LOCKED:
		return Locked
	case bfspb.LockStatus_LOCK_STATUS_CLEANING:
		return Cleaning
	}
	return Unlocked
}

func dirLockFromWire(d *bfspb.DirLock) *DirLock {
	if d == nil {
		return nil
	}
	l := &DirLock{
		Path: d.Path, Status: lockStatusFromWire(d.Status), Holder: d.Holder, SessionID: d.SessionId,
		Epoch: d.Epoch, Since: timeFromWire(d.SinceNs),
	}
	for _, p := range d.Pending {
		l.Pending = append(l.Pending, PendingFile{Path: p.Path, BlockID: p.BlockId, Replicas: p.PendingReplicas})
	}
	return l
}

// timeFromWire turns nanoseconds since the epoch into a time; 0 (not
// known, or not set) is the zero time, not 1970.
func timeFromWire(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// lockError is the error for a lock request refused because of d.
func lockError(code bfspb.StatusCode, msg string, d *bfspb.DirLock) error {
	if (code == bfspb.StatusCode_LOCKED || code == bfspb.StatusCode_CLEANING) && d != nil {
		return &LockedError{Path: d.Path, Holder: d.Holder, Epoch: d.Epoch, Status: code}
	}
	return statusError(code, msg, nil)
}

// LockOption configures LockDir.
type LockOption func(*lockOptions)

type lockOptions struct{ wait bool }

// WaitForLock makes LockDir block until the lock can be granted (or ctx
// ends) instead of failing with ErrLocked or ErrCleaning. The waiting is
// done by the nameserver, which answers as soon as the directory changes.
// A wait that ends at ctx's deadline returns an error matching both
// context.DeadlineExceeded and the *LockedError naming who still has the
// directory (when the nameserver's answer made it back in time).
func WaitForLock() LockOption { return func(o *lockOptions) { o.wait = true } }

// Lock is a directory lock held by this client's session. Its Done
// channel is closed when the lock is lost: the session expired or was
// closed (also by Client.Close), the directory was unlocked by anyone
// else (the master's forced unlock) or by this session through UnlockDir,
// or it was deleted.
// A tablet server stops serving the directory when Done closes.
//
// The handles of a session learn of their loss from one WatchDirLocks
// stream per session, started with the session's first lock and stopped
// with the session. Should the stream break (a nameserver restart), the
// handles look up their lock's state once a new stream is up.
type Lock struct {
	c       *Client
	path    string
	epoch   uint64
	holder  string
	session *Session
	watch   *sessionWatch

	done chan struct{}
	once sync.Once
	err  error // set once, before done is closed
}

// LockDir locks the directory path for the client's session. Locking a
// directory the session holds already succeeds with the same epoch (and
// another handle of the same lock).
func (c *Client) LockDir(ctx context.Context, path string, opts ...LockOption) (*Lock, error) {
	l, err := c.lockDir(ctx, path, opts)
	return l, pathError("lock", path, err)
}

func (c *Client) lockDir(ctx context.Context, path string, opts []LockOption) (*Lock, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	var o lockOptions
	for _, opt := range opts {
		opt(&o)
	}
	var resp *bfspb.LockDirResponse
	var l *Lock
	var recheck bool
	err = c.mutateLock(ctx, func(s *Session) (response, error) {
		w, err := c.sessionWatch(ctx, s)
		if err != nil && c.lostUnder(ctx, s) {
			// Like an answer that the session expired: nothing was asked
			// of the nameserver yet, so it is retried with a new session.
			return &bfspb.LockDirResponse{Status: bfspb.StatusCode_SESSION_EXPIRED, Message: err.Error()}, nil
		}
		if err != nil {
			return nil, err
		}
		// Expected before the request, so an end of the lock that arrives
		// before the answer is kept for it.
		gen := w.expect(p)
		resp, err = c.ns.LockDir(ctx, &bfspb.LockDirRequest{Path: p, SessionId: s.id, Wait: o.wait})
		if err != nil || resp.Status != bfspb.StatusCode_OK || resp.Lock == nil {
			w.settle(p, gen, nil)
			return resp, err
		}
		d := resp.Lock
		c.fences.granted(p, d.Epoch)
		l = &Lock{c: c, path: p, epoch: d.Epoch, holder: d.Holder, session: s, watch: w, done: make(chan struct{})}
		recheck = w.settle(p, gen, l)
		return resp, nil
	})
	switch {
	case err == nil && l == nil:
		return nil, fmt.Errorf("%w: lock answer without the lock", ErrInternal)
	case err == nil:
		if recheck && !l.recheck(ctx) {
			l.watch.uncheck(l) // the watch looks it up until it can
		}
		return l, nil
	case resp == nil || (resp.Status != bfspb.StatusCode_LOCKED && resp.Status != bfspb.StatusCode_CLEANING):
		return nil, err
	}
	le := lockError(resp.Status, resp.Message, resp.Lock)
	if !o.wait {
		return nil, le
	}
	// The nameserver ends a wait only at (just before) the deadline.
	return nil, &waitEndedError{refused: le, ctxErr: deadlineErr(ctx)}
}

// lostUnder reports whether s was lost while a call of the caller's ctx,
// which is still live, used it. A session stopped by Close is not lost:
// Close marks the Client closed before it stops the session, so a stopped
// session of an open Client was stopped by its loss (its Err may not say
// so yet: end stops the session before it records why).
func (c *Client) lostUnder(ctx context.Context, s *Session) bool {
	return ctx.Err() == nil && s.stopCtx.Err() != nil && c.checkOpen() == nil
}

// deadlineErr is ctx's error, or DeadlineExceeded if it has not ended
// yet (the nameserver's answer came just before the deadline).
func deadlineErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// waitEndedError is a wait (WaitForLock, WaitUnlocked) that ended at the
// caller's deadline with the directory still locked or cleaning. It
// matches both the context's error and the refusal: errors.As finds the
// *LockedError with the holder.
type waitEndedError struct {
	refused error
	ctxErr  error
}

func (e *waitEndedError) Error() string {
	return e.refused.Error() + " when the wait ended: " + e.ctxErr.Error()
}
func (e *waitEndedError) Unwrap() []error { return []error{e.refused, e.ctxErr} }

// mutateLock is mutate for calls that need the session itself.
func (c *Client) mutateLock(ctx context.Context, call func(s *Session) (response, error)) error {
	for attempt := 0; ; attempt++ {
		s, err := c.Session(ctx)
		if err != nil {
			return err
		}
		resp, err := call(s)
		if err != nil {
			return transportError(ctx, err)
		}
		if resp.GetStatus() == bfspb.StatusCode_SESSION_EXPIRED {
			s.end(ErrSessionExpired)
			if attempt == 0 {
				continue
			}
		}
		return responseError(resp)
	}
}

// ErrLockLost is the reason a Lock's Done closed when the lock was taken
// away (a forced unlock) rather than lost with the session.
var ErrLockLost = errors.New("directory lock lost")

// lose closes Done with err (once) and drops the handle from its
// session's watch: the lock was taken away, so it keeps fencing the
// client's mutations in its directory (see fences).
func (l *Lock) lose(err error) { l.end(err, false) }

// end closes Done with err (once) and drops the handle from its session's
// watch. released says the client let the lock go itself (Unlock, or the
// deletion of its directory), which lifts its fence; else it was lost.
// Whichever end comes first decides.
func (l *Lock) end(err error, released bool) {
	l.once.Do(func() {
		if released {
			l.c.fences.released(l.path, l.epoch)
		} else {
			l.c.fences.lost(l.path, l.epoch)
		}
		l.err = err
		close(l.done)
	})
	l.watch.forget(l)
}

// recheck looks the lock up, for a handle whose end may have passed while
// its session's watch was being restarted, and reports whether it could:
// an answer about the path settles it (a path that is gone, or no longer
// a directory, lost its lock); a call that got no answer, or a nameserver
// that could not answer then, leaves it to be looked up again.
func (l *Lock) recheck(ctx context.Context) bool {
	d, err := l.c.GetDirLock(ctx, l.path)
	switch {
	case err == nil && (d.Status != Locked || d.Epoch != l.epoch):
		l.lose(fmt.Errorf("%w: %s is %s (epoch %d)", ErrLockLost, l.path, d.Status, d.Epoch))
	case err == nil:
	case !answered(err):
		glog.V(1).Infof("bfs sdk: looking up lock %s (epoch %d): %v", l.path, l.epoch, err)
		return false
	default:
		l.lose(fmt.Errorf("%w: %w", ErrLockLost, err))
	}
	return true
}

// answered reports whether err, from a nameserver call, is the
// nameserver's answer about the request: not a call that got no answer
// (a gRPC error, a cancellation, a deadline), nor one the nameserver
// could not answer at the time (not the leader, unavailable, an internal
// error), which another try may get answered.
func answered(err error) bool {
	if _, ok := status.FromError(err); ok {
		return false
	}
	for _, transient := range []error{context.Canceled, context.DeadlineExceeded, ErrUnavailable, ErrNotLeader, ErrInternal} {
		if errors.Is(err, transient) {
			return false
		}
	}
	return true
}

// Path returns the locked directory.
func (l *Lock) Path() string { return l.path }

// Epoch returns the lock's epoch: it increases with every grant, so a
// resource stamped with it can refuse a holder of an older lock.
func (l *Lock) Epoch() uint64 { return l.epoch }

// Holder returns the holder id recorded with the lock.
func (l *Lock) Holder() string { return l.holder }

// SessionID returns the id of the session the lock belongs to.
func (l *Lock) SessionID() string { return l.session.id }

// Done is closed when the lock is lost (see Lock).
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err returns why Done closed (nil while the lock is held): an error
// matching ErrLockLost.
func (l *Lock) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// Unlock releases the lock. The directory is CLEANING until the files
// open in it are sealed, then UNLOCKED; Unlock does not wait for that.
// Done is closed first: the holder stops using the directory before it
// is released.
//
// Unlocking a lock that was lost already (Done closed) does not lift its
// fence: the client's mutations in the directory stay refused with
// ErrStaleEpoch until it locks the directory again.
func (l *Lock) Unlock(ctx context.Context) error {
	l.end(fmt.Errorf("%w: unlocked by its holder", ErrLockLost), true)
	_, err := l.c.unlockDir(ctx, l.path, unlockOptions{epoch: l.epoch, session: l.session.id})
	if errors.Is(err, ErrStaleEpoch) {
		return nil // forced away and locked anew already: nothing of ours to release
	}
	return pathError("unlock", l.path, err)
}

// UnlockOption configures UnlockDir.
type UnlockOption func(*unlockOptions)

type unlockOptions struct {
	force   bool
	wait    bool
	epoch   uint64
	session string
}

// Force unlocks a lock held by another session (the master's failover
// unlock; an operator's). It needs an admin certificate: others get
// ErrPermissionDenied.
func Force() UnlockOption { return func(o *unlockOptions) { o.force = true } }

// WaitUnlocked makes UnlockDir return only once the directory is UNLOCKED:
// every file that was open in it sealed and closed.
func WaitUnlocked() UnlockOption { return func(o *unlockOptions) { o.wait = true } }

// AtEpoch refuses the unlock (ErrStaleEpoch) unless the lock has epoch e,
// so an unlock meant for an old lock never releases a newer one.
func AtEpoch(e uint64) UnlockOption { return func(o *unlockOptions) { o.epoch = e } }

// UnlockDir unlocks the directory path: with Force whoever holds it, else
// only if this client's session does. It returns the state the directory
// is left in: CLEANING, or UNLOCKED when nothing had to be drained (or
// with WaitUnlocked). A directory already UNLOCKED or CLEANING is answered
// with its state, not an error: the call may be a retry.
func (c *Client) UnlockDir(ctx context.Context, path string, opts ...UnlockOption) (*DirLock, error) {
	var o unlockOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !o.force {
		s, err := c.Session(ctx)
		if err != nil {
			return nil, pathError("unlock", path, err)
		}
		o.session = s.id
	}
	d, err := c.unlockDir(ctx, path, o)
	return d, pathError("unlock", path, err)
}

func (c *Client) unlockDir(ctx context.Context, path string, o unlockOptions) (*DirLock, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	// Until its answer lifted the fences, the ends the watch reports under
	// p are this call's.
	defer c.fences.releasing(p)()
	resp, err := c.ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: p, SessionId: o.session, Force: o.force, Epoch: o.epoch, Wait: o.wait})
	if err != nil {
		return nil, transportError(ctx, err)
	}
	// UNLOCKED and CLEANING are the state the directory is in, whether
	// this call or an earlier one (a retry) made it so: not errors.
	d := dirLockFromWire(resp.Lock)
	if d == nil {
		d = &DirLock{Path: p}
	}
	switch resp.Status {
	case bfspb.StatusCode_UNLOCKED:
		c.fences.released(p, d.Epoch)
		d.Status = Unlocked
		return d, nil
	case bfspb.StatusCode_CLEANING:
		c.fences.released(p, d.Epoch)
		d.Status = Cleaning
		if o.wait {
			// The nameserver ends a wait only at (just before) the deadline.
			return d, &waitEndedError{refused: lockError(resp.Status, resp.Message, resp.Lock), ctxErr: deadlineErr(ctx)}
		}
		return d, nil
	}
	return d, lockError(resp.Status, resp.Message, resp.Lock)
}

// GetDirLock returns the lock state of the directory path.
func (c *Client) GetDirLock(ctx context.Context, path string) (*DirLock, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, pathError("lock status", path, err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := c.ns.GetDirLock(ctx, &bfspb.GetDirLockRequest{Path: p})
	if err != nil {
		return nil, pathError("lock status", path, transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return nil, pathError("lock status", path, err)
	}
	return dirLockFromWire(resp.Lock), nil
}
