package sdk

import (
	"context"
	"fmt"
	"time"

	"github.com/bfs-go/bfs/internal/millis"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// LockDirOperator takes an operator lock on path: bound to no session, it
// outlives this client and is released only by a forced unlock. holder is
// recorded as its holder id.
func (c *Client) LockDirOperator(ctx context.Context, path, holder string) (*DirLock, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, pathError("lock", path, err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := c.ns.LockDir(ctx, &bfspb.LockDirRequest{Path: p, Operator: true, Holder: holder})
	if err != nil {
		return nil, pathError("lock", path, transportError(ctx, err))
	}
	if resp.Status != bfspb.StatusCode_OK {
		return nil, pathError("lock", path, lockError(resp.Status, resp.Message, resp.Lock))
	}
	return dirLockFromWire(resp.Lock), nil
}

// ListDirLocks lists the locked and cleaning directories at or under
// prefix; with only set, just those in that state.
func (c *Client) ListDirLocks(ctx context.Context, prefix string, only *LockStatus) ([]*DirLock, error) {
	p, err := cleanPath(prefix)
	if err != nil {
		return nil, pathError("list locks", prefix, err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	req := &bfspb.ListDirLocksRequest{Prefix: p}
	if only != nil {
		req.FilterStatus = true
		req.Status = lockStatusToWire(*only)
	}
	resp, err := c.ns.ListDirLocks(ctx, req)
	if err != nil {
		return nil, pathError("list locks", prefix, transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return nil, pathError("list locks", prefix, err)
	}
	out := make([]*DirLock, 0, len(resp.Locks))
	for _, l := range resp.Locks {
		out = append(out, dirLockFromWire(l))
	}
	return out, nil
}

func lockStatusToWire(s LockStatus) bfspb.LockStatus {
	switch s {
	case Locked:
		return bfspb.LockStatus_LOCK_STATUS_LOCKED
	case Cleaning:
		return bfspb.LockStatus_LOCK_STATUS_CLEANING
	}
	return bfspb.LockStatus_LOCK_STATUS_UNLOCKED
}

// DirLockEvent is one lock transition.
type DirLockEvent struct {
	Lock     DirLock
	Previous LockStatus
	// Reason is "lock", "holder", "force", "expiry" or "cleaned".
	Reason string
}

// LockWatch is a stream of lock transitions; see WatchDirLocks.
type LockWatch struct {
	stream bfspb.NameServer_WatchDirLocksClient
	cancel context.CancelFunc
	ctx    context.Context
}

// WatchDirLocks streams the lock transitions at or under prefix until ctx
// ends or Close is called. It returns once the nameserver has registered
// the watch: every transition after that is delivered.
func (c *Client) WatchDirLocks(ctx context.Context, prefix string) (*LockWatch, error) {
	p, err := cleanPath(prefix)
	if err != nil {
		return nil, pathError("watch locks", prefix, err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &LockWatch{cancel: cancel, ctx: ctx}
	w.stream, err = c.ns.WatchDirLocks(ctx, &bfspb.WatchDirLocksRequest{Prefix: p})
	if err == nil {
		err = w.started()
	}
	if err != nil {
		cancel()
		return nil, pathError("watch locks", prefix, transportError(ctx, err))
	}
	return w, nil
}

// started waits for the nameserver's confirmation (its response headers).
func (w *LockWatch) started() error {
	md, err := w.stream.Header()
	if err != nil || md != nil {
		return err
	}
	if _, err := w.stream.Recv(); err != nil {
		return err // the stream ended before it started: this says why
	}
	return fmt.Errorf("%w: lock watch sent an event before it started", ErrInternal)
}

// Next blocks for the next transition. Once the stream has ended, by
// Close, ctx or a failure, it returns why: an error matching
// context.Canceled after Close.
func (w *LockWatch) Next() (DirLockEvent, error) {
	ev, err := w.stream.Recv()
	if err != nil {
		return DirLockEvent{}, transportError(w.ctx, err)
	}
	return DirLockEvent{Lock: *dirLockFromWire(ev.Lock), Previous: lockStatusFromWire(ev.Previous), Reason: ev.Reason}, nil
}

// Close ends the stream.
func (w *LockWatch) Close() { w.cancel() }

// LockHistoryEntry is one past lock of a directory.
type LockHistoryEntry struct {
	Holder         string
	Epoch          uint64
	LockedAt       time.Time
	UnlockedAt     time.Time
	Reason         string
	FilesSealed    int64
	BytesTruncated int64
}

// LockHistory returns the past locks of the directory path, oldest first
// (the nameserver keeps a bounded number).
func (c *Client) LockHistory(ctx context.Context, path string) ([]LockHistoryEntry, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, pathError("lock history", path, err)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := c.ns.GetLockHistory(ctx, &bfspb.GetLockHistoryRequest{Path: p})
	if err != nil {
		return nil, pathError("lock history", path, transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return nil, pathError("lock history", path, err)
	}
	out := make([]LockHistoryEntry, 0, len(resp.Entries))
	for _, e := range resp.Entries {
		out = append(out, LockHistoryEntry{
			Holder: e.Holder, Epoch: e.Epoch, LockedAt: timeFromWire(e.LockedAtNs), UnlockedAt: timeFromWire(e.UnlockedAtNs),
			Reason: e.Reason, FilesSealed: e.FilesSealed, BytesTruncated: e.BytesTruncated,
		})
	}
	return out, nil
}

// SessionInfo is a live session as the nameserver sees it.
type SessionInfo struct {
	ID        string
	Holder    string
	TTL       time.Duration
	Remaining time.Duration
	OpenFiles int64
	Locks     []string
}

// Sessions lists the live sessions.
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := c.ns.ListSessions(ctx, &bfspb.ListSessionsRequest{})
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if err := responseError(resp); err != nil {
		return nil, err
	}
	out := make([]SessionInfo, 0, len(resp.Sessions))
	for _, s := range resp.Sessions {
		ttl, ok1 := millis.Duration(s.TtlMs)
		remaining, ok2 := millis.Duration(s.RemainingMs)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: nameserver listed session %s with ttl %d ms, %d ms remaining",
				ErrInternal, s.SessionId, s.TtlMs, s.RemainingMs)
		}
		out = append(out, SessionInfo{
			ID: s.SessionId, Holder: s.Holder, TTL: ttl,
			Remaining: remaining, OpenFiles: s.OpenFiles, Locks: s.Locks,
		})
	}
	return out, nil
}
