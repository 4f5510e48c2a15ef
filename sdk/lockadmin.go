package sdk

import (
	"context"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/bfs-go/bfs/internal/millis"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// LockDirOperator takes an operator lock on path: bound to no session, it
// outlives this client and is released only by a forced unlock. holder is
// recorded as its holder id. It needs an admin certificate.
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

// LockQuery selects the locks AllDirLocks lists; the zero value selects
// them all.
type LockQuery struct {
	// Prefix keeps the locks at or under this directory ("" is "/").
	Prefix string
	// Status keeps only the locks in this state; Unlocked, the zero
	// value, keeps both Locked and Cleaning.
	Status LockStatus
	// Holder and SessionID, when set, keep only the locks with that holder
	// or of that session.
	Holder    string
	SessionID string
	// PageSize is how many locks each request asks for; 0 leaves it to
	// the nameserver (which also caps it).
	PageSize int
}

// AllDirLocks lists the locked and cleaning directories q selects, sorted
// by path. The nameserver filters them and sends them a page at a time;
// the next page is asked for only when the loop wants more, so breaking
// out early costs nothing further. Locks granted or released while the
// listing runs may or may not be listed, but none is listed twice. A
// failure ends the sequence: it is yielded once, with a nil lock. Each
// range over the sequence lists afresh.
func (c *Client) AllDirLocks(ctx context.Context, q LockQuery) iter.Seq2[*DirLock, error] {
	fail := func(err error) iter.Seq2[*DirLock, error] {
		return func(yield func(*DirLock, error) bool) { yield(nil, pathError("list locks", q.Prefix, err)) }
	}
	prefix := q.Prefix
	if prefix == "" {
		prefix = "/"
	}
	p, err := cleanPath(prefix)
	if err != nil {
		return fail(err)
	}
	size, err := pageSizeOf(q.PageSize)
	if err != nil {
		return fail(err)
	}
	return pages(func(token string) ([]*DirLock, string, error) {
		if err := c.checkOpen(); err != nil {
			return nil, "", err
		}
		req := &bfspb.ListDirLocksRequest{Prefix: p, Holder: q.Holder, SessionId: q.SessionID, PageSize: size, PageToken: token}
		if q.Status != Unlocked {
			req.FilterStatus, req.Status = true, lockStatusToWire(q.Status)
		}
		resp, err := c.ns.ListDirLocks(ctx, req)
		if err != nil {
			return nil, "", pathError("list locks", prefix, transportError(ctx, err))
		}
		if err := responseError(resp); err != nil {
			return nil, "", pathError("list locks", prefix, err)
		}
		out := make([]*DirLock, 0, len(resp.Locks))
		for _, l := range resp.Locks {
			out = append(out, dirLockFromWire(l))
		}
		return out, resp.NextPageToken, nil
	})
}

// ListDirLocks lists the locked and cleaning directories at or under
// prefix; with only set, just those in that state. It collects every page
// of AllDirLocks: prefer that for a listing that may be long.
func (c *Client) ListDirLocks(ctx context.Context, prefix string, only *LockStatus) ([]*DirLock, error) {
	q := LockQuery{Prefix: prefix}
	if only != nil {
		if *only == Unlocked { // never listed: nothing to ask
			if _, err := cleanPath(prefix); err != nil {
				return nil, pathError("list locks", prefix, err)
			}
			return nil, c.checkOpen()
		}
		q.Status = *only
	}
	return collect(c.AllDirLocks(ctx, q))
}

// pageSizeOf checks a page size for the wire.
func pageSizeOf(n int) (uint32, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: page size %d is negative", ErrInvalidArgument, n)
	}
	return uint32(min(n, math.MaxUint32)), nil
}

// pages is a listing fetched a page at a time: fetch returns the page at
// token ("" for the first) and the token of the next ("" after the last).
func pages[T any](fetch func(token string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for token := ""; ; {
			items, next, err := fetch(token)
			if err == nil && next != "" && next == token && len(items) == 0 {
				err = fmt.Errorf("%w: the nameserver's listing did not move past its page token", ErrInternal)
			}
			if err != nil {
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}

// collect gathers a whole listing, or its first error.
func collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for it, err := range seq {
		if err != nil {
			return nil, err
		}
		out = append(out, it)
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
	w.stream, err = c.openWatch(ctx, &bfspb.WatchDirLocksRequest{Prefix: p})
	if err != nil {
		cancel()
		return nil, pathError("watch locks", prefix, transportError(ctx, err))
	}
	return w, nil
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

// AllLockHistory lists the past locks of the directory path, oldest
// (lowest epoch) first, a page of pageSize entries per request (0: the
// nameserver's default); the nameserver keeps a bounded number. A failure
// ends the sequence: it is yielded once.
func (c *Client) AllLockHistory(ctx context.Context, path string, pageSize int) iter.Seq2[LockHistoryEntry, error] {
	p, err := cleanPath(path)
	var size uint32
	if err == nil {
		size, err = pageSizeOf(pageSize)
	}
	if err != nil {
		return func(yield func(LockHistoryEntry, error) bool) {
			yield(LockHistoryEntry{}, pathError("lock history", path, err))
		}
	}
	return pages(func(token string) ([]LockHistoryEntry, string, error) {
		if err := c.checkOpen(); err != nil {
			return nil, "", err
		}
		resp, err := c.ns.GetLockHistory(ctx, &bfspb.GetLockHistoryRequest{Path: p, PageSize: size, PageToken: token})
		if err != nil {
			return nil, "", pathError("lock history", path, transportError(ctx, err))
		}
		if err := responseError(resp); err != nil {
			return nil, "", pathError("lock history", path, err)
		}
		out := make([]LockHistoryEntry, 0, len(resp.Entries))
		for _, e := range resp.Entries {
			out = append(out, LockHistoryEntry{
				Holder: e.Holder, Epoch: e.Epoch, LockedAt: timeFromWire(e.LockedAtNs), UnlockedAt: timeFromWire(e.UnlockedAtNs),
				Reason: e.Reason, FilesSealed: e.FilesSealed, BytesTruncated: e.BytesTruncated,
			})
		}
		return out, resp.NextPageToken, nil
	})
}

// LockHistory returns the past locks of the directory path, oldest first
// (the nameserver keeps a bounded number): every page of AllLockHistory.
func (c *Client) LockHistory(ctx context.Context, path string) ([]LockHistoryEntry, error) {
	return collect(c.AllLockHistory(ctx, path, 0))
}

// SessionInfo is a live session as the nameserver sees it.
type SessionInfo struct {
	ID        string
	Holder    string
	TTL       time.Duration
	Remaining time.Duration
	OpenFiles int64
	// Locks are the paths of the directories the session holds locked:
	// the first ones by path, at most 1000 (LockCount says how many it
	// holds; AllDirLocks with its SessionID lists them all).
	Locks     []string
	LockCount int64
}

// SessionQuery selects the sessions AllSessions lists; the zero value
// selects them all.
type SessionQuery struct {
	// Holder, when set, keeps only the sessions with that holder.
	Holder string
	// PageSize is how many sessions each request asks for; 0 leaves it to
	// the nameserver (which also caps it).
	PageSize int
}

// AllSessions lists the live sessions q selects, sorted by id, fetching
// a page at a time as the loop asks for more. A failure ends the
// sequence: it is yielded once.
func (c *Client) AllSessions(ctx context.Context, q SessionQuery) iter.Seq2[SessionInfo, error] {
	size, err := pageSizeOf(q.PageSize)
	if err != nil {
		return func(yield func(SessionInfo, error) bool) { yield(SessionInfo{}, err) }
	}
	return pages(func(token string) ([]SessionInfo, string, error) {
		if err := c.checkOpen(); err != nil {
			return nil, "", err
		}
		req := &bfspb.ListSessionsRequest{Holder: q.Holder, PageSize: size, PageToken: token}
		resp, err := c.ns.ListSessions(ctx, req)
		if err != nil {
			return nil, "", transportError(ctx, err)
		}
		if err := responseError(resp); err != nil {
			return nil, "", err
		}
		out := make([]SessionInfo, 0, len(resp.Sessions))
		for _, s := range resp.Sessions {
			ttl, ok1 := millis.Duration(s.TtlMs)
			remaining, ok2 := millis.Duration(s.RemainingMs)
			if !ok1 || !ok2 {
				return nil, "", fmt.Errorf("%w: nameserver listed session %s with ttl %d ms, %d ms remaining",
					ErrInternal, s.SessionId, s.TtlMs, s.RemainingMs)
			}
			out = append(out, SessionInfo{
				ID: s.SessionId, Holder: s.Holder, TTL: ttl, Remaining: remaining, OpenFiles: s.OpenFiles,
				Locks: s.Locks, LockCount: s.LockCount,
			})
		}
		return out, resp.NextPageToken, nil
	})
}

// Sessions lists the live sessions: every page of AllSessions.
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	return collect(c.AllSessions(ctx, SessionQuery{}))
}
