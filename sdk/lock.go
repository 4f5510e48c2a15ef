package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// DirLock is the state of a directory lock as the nameserver reports it.
type DirLock struct {
	Path      string
	Status    LockStatus
	Holder    string
	SessionID string
	Epoch     uint64
	Since     time.Time
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
		Epoch: d.Epoch, Since: time.Unix(0, d.SinceNs),
	}
	for _, p := range d.Pending {
		l.Pending = append(l.Pending, PendingFile{Path: p.Path, BlockID: p.BlockId, Replicas: p.PendingReplicas})
	}
	return l
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
func WaitForLock() LockOption { return func(o *lockOptions) { o.wait = true } }

// Lock is a directory lock held by this client's session. Its Done
// channel is closed when the lock is lost: the session expired or was
// closed, or someone unlocked the directory (the master's forced unlock).
// A tablet server stops serving the directory when Done closes.
type Lock struct {
	c       *Client
	path    string
	epoch   uint64
	holder  string
	session *Session

	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
	once   sync.Once
	err    error
}

// LockDir locks the directory path for the client's session. Locking a
// directory the session holds already succeeds with the same epoch.
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
	var sess *Session
	err = c.mutateLock(ctx, func(s *Session) (response, error) {
		sess = s
		var err error
		resp, err = c.ns.LockDir(ctx, &bfspb.LockDirRequest{Path: p, SessionId: s.id, Wait: o.wait})
		return resp, err
	})
	if err != nil {
		if resp != nil && (resp.Status == bfspb.StatusCode_LOCKED || resp.Status == bfspb.StatusCode_CLEANING) {
			return nil, lockError(resp.Status, resp.Message, resp.Lock)
		}
		return nil, err
	}
	return c.watchLock(p, resp.GetLock(), sess)
}

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

// watchLock starts the goroutine that closes the handle's Done when the
// lock is lost.
func (c *Client) watchLock(path string, d *bfspb.DirLock, s *Session) (*Lock, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: lock answer without the lock", ErrInternal)
	}
	ctx, cancel := context.WithCancel(s.stopCtx)
	l := &Lock{c: c, path: path, epoch: d.Epoch, holder: d.Holder, session: s, cancel: cancel, done: make(chan struct{})}
	stream, err := c.ns.WatchDirLocks(ctx, &bfspb.WatchDirLocksRequest{Prefix: path})
	if err != nil {
		cancel()
		return nil, transportError(ctx, err)
	}
	l.wg.Add(1)
	c.lockWatches.Add(1)
	go func() {
		defer c.lockWatches.Done()
		l.watch(ctx, stream)
	}()
	// A transition between the grant and the watch would be missed: look.
	if cur, err := c.GetDirLock(ctx, path); err == nil && (cur.Status != Locked || cur.Epoch != l.epoch) {
		l.lose(fmt.Errorf("%w: %s was unlocked", ErrLockLost, path))
	}
	return l, nil
}

// ErrLockLost is the reason a Lock's Done closed when the lock was taken
// away (a forced unlock) rather than lost with the session.
var ErrLockLost = errors.New("directory lock lost")

func (l *Lock) watch(ctx context.Context, stream bfspb.NameServer_WatchDirLocksClient) {
	defer l.wg.Done()
	events := make(chan *bfspb.DirLockEvent)
	errc := make(chan error, 1)
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				errc <- ctx.Err()
				return
			}
		}
	}()
	for {
		select {
		case <-l.session.Done():
			l.lose(fmt.Errorf("%w: session lost: %v", ErrLockLost, l.session.Err()))
			l.cancel()
			<-errc
			return
		case ev := <-events:
			if ev.Lock.GetPath() == l.path && ev.Lock.GetEpoch() == l.epoch && ev.Lock.GetStatus() != bfspb.LockStatus_LOCK_STATUS_LOCKED {
				l.lose(fmt.Errorf("%w: %s unlocked (%s)", ErrLockLost, l.path, ev.Reason))
			}
		case err := <-errc:
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				// The watch broke (nameserver restart): the session keep-alive
				// still guards the lock; look once more for a transition.
				if cur, gerr := l.c.GetDirLock(ctx, l.path); gerr == nil && (cur.Status != Locked || cur.Epoch != l.epoch) {
					l.lose(fmt.Errorf("%w: %s was unlocked", ErrLockLost, l.path))
				}
			}
			return
		case <-ctx.Done():
			<-errc
			return
		}
	}
}

func (l *Lock) lose(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
	})
}

// Path returns the locked directory.
func (l *Lock) Path() string { return l.path }

// Epoch returns the lock's epoch: it increases with every grant, so a
// resource stamped with it can refuse a holder of an older lock.
func (l *Lock) Epoch() uint64 { return l.epoch }

// Holder returns the holder id recorded with the lock.
func (l *Lock) Holder() string { return l.holder }

// Done is closed when the lock is lost (see Lock).
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err returns why Done closed (nil while the lock is held).
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
func (l *Lock) Unlock(ctx context.Context) error {
	l.lose(fmt.Errorf("%w: unlocked by its holder", ErrLockLost))
	l.cancel()
	l.wg.Wait()
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
// unlock; an operator's).
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
		d.Status = Unlocked
		return d, nil
	case bfspb.StatusCode_CLEANING:
		d.Status = Cleaning
		if o.wait {
			if err := ctx.Err(); err != nil {
				return d, err
			}
			return d, lockError(resp.Status, resp.Message, resp.Lock)
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
