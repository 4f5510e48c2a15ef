package nameserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Reasons recorded for unlocks.
const (
	reasonHolder = "holder"
	reasonForce  = "force"
	reasonExpiry = "expiry"
	// Reasons of the other transitions watchers see.
	reasonLock    = "lock"
	reasonCleaned = "cleaned"
	reasonDeleted = "deleted"
)

// cleaningCounts is the cleanings in progress and the files they still
// wait for, for metrics.
func (s *Server) cleaningCounts() (n, pending int) {
	t := s.current()
	if t == nil {
		return 0, 0 // only a leader cleans
	}
	jobs := t.cleaner.Jobs()
	for _, j := range jobs {
		pending += len(t.closer.Pending(j.Files...))
	}
	return len(jobs), pending
}

// LockDir locks a directory for the caller's session; with wait it blocks
// until the lock can be granted or the call's deadline (nearly) passes.
// A directory where other sessions have files open for write is cleaned
// first (SPEC §6: a grant starts clean); the call waits for that cleaning,
// with or without wait, then tries the grant again.
//
// A waiting call waits for the lock that refused it (or the cleaning it
// started) to change, and only then looks again, in the lock table as
// this member applied it: it asks the group again only once the table
// would let it. So a waiting call costs nothing while other locks come
// and go, and adds nothing to the log while it stays refused.
func (srv *Server) LockDir(ctx context.Context, req *bfspb.LockDirRequest) (*bfspb.LockDirResponse, error) {
	s, notLeader := leading[*bfspb.LockDirResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	ctx, cancel := beforeDeadline(ctx)
	defer cancel()
	var (
		before *dirlock.Lock // the cleaning this call started before its grant
		leave  func()        // ends the count of this call's wait
		woken  bool
	)
	defer func() {
		if leave != nil {
			leave()
		}
	}()
	for {
		var resp *bfspb.LockDirResponse
		var refusedBy *dirlock.Lock // what the call waits for to change
		if before != nil && s.stillCleaning(*before) {
			resp, refusedBy = &bfspb.LockDirResponse{Status: bfspb.StatusCode_CLEANING, Lock: s.dirLock(*before)}, before
		} else if woken && req.Wait && s.stillRefused(req, &resp, &refusedBy) {
			// Still refused as the lock table stands here: asking the group
			// again would only add a command to the log that fails.
		} else {
			res, err := s.lockDir(req)
			code, msg := statusOf(err)
			resp = &bfspb.LockDirResponse{Status: code, Message: msg, Lock: s.dirLockOf(res, err)}
			waitable := errors.Is(err, dirlock.ErrLocked) || errors.Is(err, dirlock.ErrCleaning)
			if before = nil; err == nil && res.Lock.Status == dirlock.Cleaning {
				before, resp.Status = res.Lock, bfspb.StatusCode_CLEANING
				refusedBy = before
			} else if !req.Wait || !waitable {
				return resp, nil
			} else if le := (*dirlock.LockedError)(nil); errors.As(err, &le) {
				refusedBy = &le.Lock
			}
		}
		if leave == nil && refusedBy != before { // a wait for its own cleaning is no wait on another's lock
			var err error
			if leave, err = srv.enterWait(ctx); err != nil {
				code, msg := statusOf(err)
				return &bfspb.LockDirResponse{Status: code, Message: msg, Lock: resp.Lock}, nil
			}
		}
		woken = true
		if stop := s.waitChange(ctx, req, refusedBy); stop != nil {
			return stop(resp), nil
		}
	}
}

// waitChange waits until the lock l changes (its path's next transition),
// returning nil then, or, when the call must end instead, how to end its
// answer: at its deadline, or when the nameserver stops. With l nil (a
// refusal that named no lock, which the lock table never makes) it waits
// for the next transition of the directory asked for.
func (s *term) waitChange(ctx context.Context, req *bfspb.LockDirRequest, l *dirlock.Lock) func(*bfspb.LockDirResponse) *bfspb.LockDirResponse {
	path, _ := cleanPath(req.Path)
	if l != nil {
		path = l.Path
	}
	ready, done := s.watch.waitAt(path)
	defer done()
	if l != nil && !s.unchanged(*l) {
		return nil // changed before the wait began
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return func(resp *bfspb.LockDirResponse) *bfspb.LockDirResponse {
			resp.Message = "still " + strings.ToLower(resp.Status.String()) + " at the call's deadline"
			return resp
		}
	case <-s.stopc:
		return func(resp *bfspb.LockDirResponse) *bfspb.LockDirResponse {
			return &bfspb.LockDirResponse{Status: bfspb.StatusCode_UNAVAILABLE, Message: "nameserver stopping", Lock: resp.Lock}
		}
	}
}

// unchanged reports whether the lock of l's path is still l, as the lock
// table here has it.
func (s *term) unchanged(l dirlock.Lock) bool {
	now, ok := s.ns.Locks().Get(l.Path)
	return ok && now.Status == l.Status && now.Epoch == l.Epoch && now.Session == l.Session
}

// stillRefused reports whether the lock table, as this member applied
// it, refuses a LockDir now, and sets resp to the refusal and by to the
// lock that refuses it; if not, the apply step decides (also for a
// session that ended: it answers so).
func (s *term) stillRefused(req *bfspb.LockDirRequest, resp **bfspb.LockDirResponse, by **dirlock.Lock) bool {
	p, err := cleanPath(req.Path)
	if err != nil || (!req.Operator && !s.sessions.Valid(session.ID(req.SessionId))) {
		return false
	}
	_, err = s.ns.Locks().CanLock(p, dirlock.SessionID(req.SessionId))
	var le *dirlock.LockedError
	if !errors.As(err, &le) {
		return false
	}
	code, msg := statusOf(err)
	*resp, *by = &bfspb.LockDirResponse{Status: code, Message: msg, Lock: s.dirLock(le.Lock)}, &le.Lock
	return true
}

// enterWait counts a lock call about to wait against its identity's
// limit (Limits.MaxLockWaitsPerIdentity), or refuses it; leave ends the
// count.
func (s *Server) enterWait(ctx context.Context) (leave func(), err error) {
	caller, _ := s.callerOf(ctx)
	leave, err = s.waits.enter(caller.String())
	if err != nil {
		s.metrics.limits.Count(limit.LockWaits)
	}
	return leave, err
}

// stillCleaning reports whether l, a cleaning, is still going on.
func (s *Server) stillCleaning(l dirlock.Lock) bool {
	now, ok := s.ns.Locks().Get(l.Path)
	return ok && now.Status == dirlock.Cleaning && now.Epoch == l.Epoch
}

// A wait bounded by the call's deadline ends a little before it, so that
// the answer (which names who still has the directory) reaches the caller
// before its own deadline does: by a tenth of the time left, at most
// waitMarginMax.
const waitMarginMax = 50 * time.Millisecond

// beforeDeadline is ctx ending a margin before its deadline (a deadline
// is real time: it comes from the caller's context, not from our clock).
func beforeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(time.Until(deadline)/10, waitMarginMax)
	return context.WithDeadline(ctx, deadline.Add(-margin))
}

func (s *term) lockDir(req *bfspb.LockDirRequest) (*namespace.Result, error) {
	p, err := cleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	holder := req.Holder
	if !req.Operator {
		sess, ok := s.sessions.Get(session.ID(req.SessionId))
		if !ok {
			return nil, errSessionInvalid
		}
		holder = sess.Holder
	} else if req.SessionId != "" {
		return nil, namespaceInvalid("an operator lock is bound to no session")
	} else if err := session.CheckHolder(holder); err != nil {
		return nil, fmt.Errorf("operator lock: %w", err)
	}
	res, err := s.propose(&bfspb.Command{
		Op: &bfspb.Command_LockDir{LockDir: &bfspb.LockDirCmd{
			Path: p, SessionId: req.SessionId, Holder: holder, Operator: req.Operator,
		}},
	})
	if err != nil {
		return res, err
	}
	if res.Lock.Status == dirlock.Cleaning {
		// Not granted: other sessions' files are being closed first.
		glog.Infof("lock %s for %s: closing %d files other sessions have open for write there first", p, holder, len(res.Cleaning.Files))
		s.clean(cleaningOf(p, res.Info.EntryId, res.Cleaning))
		return res, nil
	}
	// A session that ended meanwhile was checked again when the command
	// applied: no grant outlives its session's CloseSession.
	return res, nil
}

func namespaceInvalid(msg string) error {
	return errors.Join(namespace.ErrInvalid, errors.New(msg))
}

// UnlockDir releases a lock: it becomes CLEANING until every file open
// for write in its subtree is sealed and closed, then UNLOCKED. With wait
// it answers only once UNLOCKED (or at the call's deadline).
func (srv *Server) UnlockDir(ctx context.Context, req *bfspb.UnlockDirRequest) (*bfspb.UnlockDirResponse, error) {
	s, notLeader := leading[*bfspb.UnlockDirResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	p, err := cleanPath(req.Path)
	if err == nil && !req.Force {
		err = s.checkSession(req.SessionId)
	}
	if err != nil {
		code, msg := statusOf(err)
		return &bfspb.UnlockDirResponse{Status: code, Message: msg}, nil
	}
	reason := reasonHolder
	if req.Force {
		reason = reasonForce
	}
	res, err := s.unlock(p, req.SessionId, req.Force, req.Epoch, reason)
	resp := s.unlockResponse(res, err)
	if !req.Wait || resp.Status != bfspb.StatusCode_CLEANING {
		return resp, nil
	}
	// Wait for this cleaning (this epoch) to end. Never unlock again: a
	// new lock may have been granted by then.
	epoch := dirlock.Epoch(resp.Lock.GetEpoch())
	leave, err := srv.enterWait(ctx)
	if err != nil {
		code, msg := statusOf(err)
		return &bfspb.UnlockDirResponse{Status: code, Message: msg, Lock: resp.Lock}, nil
	}
	defer leave()
	ctx, cancel := beforeDeadline(ctx)
	defer cancel()
	for {
		if resp := s.waitCleaned(ctx, p, epoch); resp != nil {
			return resp, nil
		}
	}
}

// waitCleaned waits once for a transition of path's lock, while it is
// still the cleaning of epoch: it returns nil after one, or the answer
// of an UnlockDir waiting for that cleaning to end (it ended, the
// call's deadline, the nameserver stopping).
func (s *term) waitCleaned(ctx context.Context, p string, epoch dirlock.Epoch) *bfspb.UnlockDirResponse {
	changed, done := s.watch.waitAt(p)
	defer done()
	l, ok := s.ns.Locks().Get(p)
	if !ok || l.Status != dirlock.Cleaning || l.Epoch != epoch {
		return &bfspb.UnlockDirResponse{Status: bfspb.StatusCode_UNLOCKED,
			Lock: &bfspb.DirLock{Path: p, Status: bfspb.LockStatus_LOCK_STATUS_UNLOCKED, Epoch: uint64(epoch)}}
	}
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return &bfspb.UnlockDirResponse{Status: bfspb.StatusCode_CLEANING, Lock: s.dirLock(l),
			Message: "still cleaning at the call's deadline"}
	case <-s.stopc:
		return &bfspb.UnlockDirResponse{Status: bfspb.StatusCode_UNAVAILABLE, Lock: s.dirLock(l),
			Message: "nameserver stopping"}
	}
}

// unlockResponse turns the outcome of an unlock into its answer: an
// UNLOCKED or CLEANING directory is the state, not a failure.
func (s *Server) unlockResponse(res *namespace.Result, err error) *bfspb.UnlockDirResponse {
	lock := s.dirLockOf(res, err)
	switch {
	case err == nil && res.Lock != nil && res.Lock.Status == dirlock.Unlocked:
		return &bfspb.UnlockDirResponse{Status: bfspb.StatusCode_UNLOCKED, Lock: lock}
	case err == nil:
		return &bfspb.UnlockDirResponse{Status: bfspb.StatusCode_CLEANING, Lock: lock}
	case errors.Is(err, dirlock.ErrUnlocked), errors.Is(err, dirlock.ErrCleaning):
		glog.V(1).Infof("unlock answered with the current state: %v", err)
	}
	code, msg := statusOf(err)
	return &bfspb.UnlockDirResponse{Status: code, Message: msg, Lock: lock}
}

// unlock applies an UnlockDir and starts the cleaning it needs.
func (s *term) unlock(path, sessionID string, force bool, epoch uint64, reason string) (*namespace.Result, error) {
	res, err := s.propose(&bfspb.Command{
		Op: &bfspb.Command_UnlockDir{UnlockDir: &bfspb.UnlockDirCmd{
			Path: path, SessionId: sessionID, Force: force, Epoch: epoch, Reason: reason,
		}},
	})
	if err != nil {
		return res, err
	}
	// A holder's unlock is routine (and recorded in the history); a forced
	// or an expired one is worth an operator's attention.
	if reason != reasonHolder {
		glog.Infof("unlock %s (%s): %v", path, reason, res.Lock.Status)
	} else if glog.V(1) {
		glog.Infof("unlock %s (%s): %v", path, reason, res.Lock.Status)
	}
	if res.Lock.Status == dirlock.Cleaning {
		s.clean(cleaningOf(path, res.Info.EntryId, res.Cleaning))
	}
	return res, nil
}

// clean starts the cleaning of a directory whose move to CLEANING (by an
// unlock, or before a grant) has committed: the cleaner closes its files,
// then persists UNLOCKED. Every cleaning of this process starts here,
// and ends in cleaned.
func (s *term) clean(j dirlock.Job) {
	s.cleaner.Start(j)
}

// cleaned is told of every cleaning that ended (the cleaner's OnEnd).
func (s *term) cleaned(j dirlock.Job, e dirlock.End) {
	switch e.Outcome {
	case dirlock.Finished:
		glog.Infof("%s cleaned: %d files sealed, %d bytes truncated", j.Path, len(j.Files), e.Truncated)
	case dirlock.HandedOver:
		glog.Infof("%s: its cleaning of epoch %d was taken over by a cleaning above it", j.Path, j.Epoch)
	default:
		glog.Errorf("finishing the cleaning of %s: %v", j.Path, e.Err)
	}
}

// publish tells watchers about the lock transitions a command made. The
// store calls it for every such command once committed, under the
// command's path locks, so the transitions of a directory are published
// in the order they happened. Every event names the lock it concerns
// (path, holder, session, epoch), also one that ends it: the SDK's handle
// of that lock matches on them.
func (s *Server) publish(cmd *bfspb.Command, res *namespace.Result) {
	s.metrics.lockChanged(cmd, res)
	reason := transitionReason(cmd)
	events := make([]*bfspb.DirLockEvent, 0, len(res.SetLocks)+len(res.RemovedLocks))
	for _, l := range res.SetLocks {
		if slices.Contains(res.RemovedLocks, l.Path) {
			continue // ended by the same command: its UNLOCKED event follows
		}
		prev, why := bfspb.LockStatus_LOCK_STATUS_UNLOCKED, reason
		switch {
		case l.Status == dirlock.Cleaning && cmd.GetLockDir() != nil:
			why = namespace.ReasonGrant // cleaned before a grant
		case l.Status == dirlock.Cleaning:
			prev = bfspb.LockStatus_LOCK_STATUS_LOCKED
		}
		events = append(events, &bfspb.DirLockEvent{Lock: s.dirLock(l), Previous: prev, Reason: why})
	}
	// A lock ends when the command that ended it was stamped, as stored,
	// like the CLEANING events above.
	now := cmd.TimeNs
	if now == 0 {
		now = s.cfg.Clock.Now().UnixNano()
	}
	for _, p := range res.RemovedLocks {
		events = append(events, endEvent(res, p, now, reason))
	}
	s.watch.publish(events...)
}

// transitionReason says why a command changed locks, for watchers.
func transitionReason(cmd *bfspb.Command) string {
	switch op := cmd.Op.(type) {
	case *bfspb.Command_LockDir:
		return reasonLock
	case *bfspb.Command_UnlockDir:
		return op.UnlockDir.Reason
	case *bfspb.Command_FinishCleaning:
		return reasonCleaned
	case *bfspb.Command_DeleteDir:
		return reasonDeleted
	}
	return "unknown"
}

// endEvent is the UNLOCKED event of path. The lock that ended is in
// res.SetLocks as it was (see namespace's finishCleaning); a lock that
// went away otherwise is known by its path only.
func endEvent(res *namespace.Result, path string, now int64, reason string) *bfspb.DirLockEvent {
	ev := &bfspb.DirLockEvent{
		Lock:     &bfspb.DirLock{Path: path, Status: bfspb.LockStatus_LOCK_STATUS_UNLOCKED, SinceNs: now},
		Previous: bfspb.LockStatus_LOCK_STATUS_CLEANING, Reason: reason,
	}
	if i := slices.IndexFunc(res.SetLocks, func(l dirlock.Lock) bool { return l.Path == path }); i >= 0 {
		l := res.SetLocks[i]
		ev.Lock.Holder, ev.Lock.SessionId, ev.Lock.Epoch = l.Holder, string(l.Session), uint64(l.Epoch)
		ev.Previous = lockStatusOf(l.Status)
	}
	return ev
}

// dirLock describes a lock for the wire, with the files still pending
// while it is cleaning.
// It asks the closer about the cleaning's own files only, so a listing
// costs what it answers, whatever else is closing.
func (s *Server) dirLock(l dirlock.Lock) *bfspb.DirLock {
	d := &bfspb.DirLock{
		Path: l.Path, Status: lockStatusOf(l.Status), Holder: l.Holder, SessionId: string(l.Session),
		Epoch: uint64(l.Epoch), SinceNs: l.Since.UnixNano(),
	}
	t := s.current()
	if l.Status != dirlock.Cleaning || t == nil {
		return d
	}
	j, ok := t.cleaner.Get(l.EntryID)
	if !ok {
		return d
	}
	pending := t.closer.Pending(j.Files...)
	for _, f := range j.Files {
		if reps, ok := pending[f]; ok {
			p, info, err := s.ns.PathOf(f)
			if err != nil {
				continue
			}
			pf := &bfspb.PendingFile{Path: p, PendingReplicas: reps}
			if n := len(info.Blocks); n > 0 {
				pf.BlockId = info.Blocks[n-1].Id
			}
			d.Pending = append(d.Pending, pf)
		}
	}
	return d
}

func (s *Server) dirLockOf(res *namespace.Result, err error) *bfspb.DirLock {
	var le *dirlock.LockedError
	switch {
	case errors.As(err, &le):
		return s.dirLock(le.Lock)
	case res != nil && res.Lock != nil:
		return s.dirLock(*res.Lock)
	}
	return nil
}

func lockStatusOf(st dirlock.Status) bfspb.LockStatus {
	switch st {
	case dirlock.Locked:
		return bfspb.LockStatus_LOCK_STATUS_LOCKED
	case dirlock.Cleaning:
		return bfspb.LockStatus_LOCK_STATUS_CLEANING
	}
	return bfspb.LockStatus_LOCK_STATUS_UNLOCKED
}

// conflictOf says which lock refused a mutation, for the answer.
func conflictOf(err error) *bfspb.LockConflict {
	var le *dirlock.LockedError
	if errors.As(err, &le) {
		return conflictWith(le.Lock)
	}
	var se *dirlock.StaleEpochError
	if errors.As(err, &se) {
		c := conflictWith(se.Lock)
		c.FencedEpoch = uint64(se.Fence.Epoch)
		return c
	}
	return nil
}

func conflictWith(l dirlock.Lock) *bfspb.LockConflict {
	return &bfspb.LockConflict{Path: l.Path, Holder: l.Holder, Epoch: uint64(l.Epoch), LockStatus: lockStatusOf(l.Status)}
}

// GetDirLock returns the lock state of one directory.
func (srv *Server) GetDirLock(ctx context.Context, req *bfspb.GetDirLockRequest) (*bfspb.GetDirLockResponse, error) {
	s, notLeader := leading[*bfspb.GetDirLockResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	p, err := cleanPath(req.Path)
	if err == nil {
		err = s.verify() // a lock's state decides: never a deposed leader's
	}
	if err == nil {
		if l, ok := s.ns.Locks().Get(p); ok {
			return &bfspb.GetDirLockResponse{Lock: s.dirLock(l)}, nil
		}
		var info *bfspb.FileInfo
		if info, err = s.ns.Stat(p); err == nil && info.Type != bfspb.FileType_FILE_TYPE_DIR {
			err = namespace.ErrNotDirectory
		}
	}
	code, msg := statusOf(err)
	resp := &bfspb.GetDirLockResponse{Status: code, Message: msg}
	if err == nil {
		resp.Lock = &bfspb.DirLock{Path: p, Status: bfspb.LockStatus_LOCK_STATUS_UNLOCKED}
	}
	return resp, nil
}

// WatchDirLocks streams lock transitions under a prefix (with a session
// id, only the ends of that session's locks) until the caller goes away.
// It sends the response headers once the watch is registered. A stream
// over its identity's or its session's limit is refused, and a watcher
// that falls further behind than the watch buffer is cut off, both
// RESOURCE_EXHAUSTED naming the limit in the trailer (limit.Trailer): a
// watcher cut off must list again and watch anew.
func (srv *Server) WatchDirLocks(req *bfspb.WatchDirLocksRequest, stream bfspb.NameServer_WatchDirLocksServer) error {
	ctx := stream.Context()
	s := srv.termOf(ctx)
	if s == nil {
		return status.Error(codes.Unavailable, srv.notLeaderMessage(ctx))
	}
	prefix := req.Prefix
	if prefix == "" {
		prefix = "/"
	}
	p, err := cleanPath(prefix)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	caller, _ := srv.callerOf(ctx) // authorizeStream let it in
	sub, err := s.watch.subscribe(p, req.SessionId, caller.String())
	if err != nil {
		name := limit.WatchStreams
		if le := (*watchLimitError)(nil); errors.As(err, &le) && le.total {
			name = limit.WatchStreamsTotal
		} else if req.SessionId != "" {
			name = limit.SessionWatchStreams
		}
		return s.metrics.limits.End(ctx, name, err.Error())
	}
	defer s.watch.unsubscribe(sub)
	// The headers tell the caller the watch is registered: from now on
	// no transition is missed.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	buf := make([]*bfspb.DirLockEvent, 0, watchBatch)
	for {
		evs, ready, lagged := s.watch.next(sub, buf)
		if lagged {
			return s.metrics.limits.End(ctx, limit.WatchLag, fmt.Sprintf(
				"lock watch fell more than %d transitions behind (--watch-buffer): cut off; list the locks again and watch anew", s.cfg.Limits.WatchBuffer))
		}
		for _, ev := range evs {
			if err := s.sendEvent(stream, sub, ev); err != nil {
				return err
			}
		}
		if ready == nil {
			continue
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil
		case <-s.stopc:
			return errStopping
		}
	}
}

// sendEvent sends ev to sub's stream if it is for sub.
func (s *term) sendEvent(stream bfspb.NameServer_WatchDirLocksServer, sub *watcher, ev *bfspb.DirLockEvent) error {
	if sub.session != "" && !fspath.Within(ev.Lock.Path, sub.prefix) {
		return nil // a session's feed has all its lock ends
	}
	if err := stream.Send(ev); err != nil {
		return err
	}
	if sub.session != "" && ev.Reason == reasonForce {
		// The holder's own stream: it has been told. The event's time is
		// the forced unlock's.
		told := s.cfg.Clock.Now().Sub(time.Unix(0, ev.Lock.SinceNs))
		s.metrics.locks.forcedNoticed.Observe(max(told, 0).Seconds())
	}
	return nil
}

var errStopping = status.Error(codes.Unavailable, "nameserver stopping")

// releaseSessionLocks cleans every lock a session held, parents first
// (their nested locks go with them).
func (s *term) releaseSessionLocks(id session.ID, reason string) {
	held := s.ns.Locks().Held(dirlock.SessionID(id))
	sort.Slice(held, func(i, j int) bool { return held[i].Path < held[j].Path })
	for _, l := range held {
		// Released, cleaning or deleted meanwhile: nothing left to do.
		if _, err := s.unlock(l.Path, string(id), true, uint64(l.Epoch), reason); err != nil &&
			!errors.Is(err, dirlock.ErrCleaning) && !errors.Is(err, dirlock.ErrUnlocked) &&
			!errors.Is(err, namespace.ErrNotFound) {
			glog.Errorf("releasing %s of ended session %s: %v", l.Path, id, err)
		}
	}
}

// resumeLocks, at startup, resumes the cleanings a crash interrupted and
// releases the locks of sessions that did not survive it.
func (s *term) resumeLocks() error {
	if _, err := s.cleaner.Resume(context.Background()); err != nil {
		return err
	}
	for _, l := range s.ns.Locks().List("/", true, dirlock.Locked) {
		if namespace.IsOperatorSession(l.Session) || s.sessions.Valid(session.ID(l.Session)) {
			continue
		}
		glog.Infof("releasing %s: its session %s did not survive the restart", l.Path, l.Session)
		s.tasks.Go(func(context.Context) { s.releaseSessionLocks(session.ID(l.Session), reasonExpiry) })
	}
	return nil
}
