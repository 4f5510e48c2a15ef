package nameserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/limit"
	"github.com/bfs-go/bfs/internal/millis"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// sessionStore persists sessions through the namespace's apply path.
type sessionStore struct{ s *term }

func (st sessionStore) PutSession(_ context.Context, sess session.Session) error {
	_, err := st.s.propose(&bfspb.Command{
		Op: &bfspb.Command_OpenSession{OpenSession: &bfspb.OpenSessionCmd{Session: &bfspb.SessionRecord{
			SessionId: string(sess.ID), Holder: sess.Holder, TtlMs: sess.TTL.Milliseconds(), OpenedNs: sess.Opened.UnixNano(),
			Owner: sess.Owner,
		}}},
	})
	return err
}

// DeleteSession commits the end of a session (CloseSessionCmd): after
// it, no command of the session applies. A session the namespace no
// longer holds answers session.ErrNotFound.
func (st sessionStore) DeleteSession(_ context.Context, id session.ID) error {
	_, err := st.s.propose(&bfspb.Command{
		Op: &bfspb.Command_CloseSession{CloseSession: &bfspb.CloseSessionCmd{SessionId: string(id)}},
	})
	if errors.Is(err, namespace.ErrSessionExpired) {
		return fmt.Errorf("%w: %w", session.ErrNotFound, err)
	}
	return err
}

func sessionFromRecord(r *bfspb.SessionRecord) session.Session {
	return session.Session{
		ID:     session.ID(r.SessionId),
		Holder: r.Holder,
		TTL:    time.Duration(r.TtlMs) * time.Millisecond,
		Opened: time.Unix(0, r.OpenedNs),
		Owner:  r.Owner,
	}
}

// onSessionEnd runs when a session's end has committed (it expired or was
// closed): every directory lock it held is cleaned as if unlocked, and
// every file it had open for write is sealed and closed (lease recovery).
// It only starts the work; files and locks of sessions without a record
// are released when a term starts, so a crash in between loses nothing.
func (s *term) onSessionEnd(sess session.Session, why session.EndReason) {
	glog.Infof("session %s (%s) ended: %v", sess.ID, sess.Holder, why)
	reason := reasonExpiry
	if why == session.Closed {
		reason = reasonHolder
	}
	if why == session.Expired {
		s.metrics.locks.expiries.Inc()
	}
	s.tasks.Go(func(context.Context) {
		s.releaseSessionLocks(sess.ID, reason)
		open, err := s.ns.OpenFiles(string(sess.ID))
		if err != nil {
			glog.Errorf("recovering files of session %s: %v", sess.ID, err)
			return
		}
		for _, f := range open {
			s.closer.Finish(f.EntryID)
		}
	})
}

// OpenSession grants a session with the asked TTL.
func (srv *Server) OpenSession(ctx context.Context, req *bfspb.OpenSessionRequest) (*bfspb.OpenSessionResponse, error) {
	s, notLeader := leading[*bfspb.OpenSessionResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	// The session belongs to whoever opens it (authz.go).
	owner, known := srv.callerOf(ctx)
	if !known {
		code, msg := statusOf(&deniedError{what: "open a session", need: "a session belongs to a verified identity"})
		return &bfspb.OpenSessionResponse{Status: code, Message: msg}, nil
	}
	ttl, ok := millis.Duration(req.TtlMs)
	var sess session.Session
	var err error
	if ok {
		sess, err = s.sessions.Open(ctx, req.Holder, ttl, owner.String())
	} else {
		err = fmt.Errorf("session ttl of %d ms is beyond what a duration holds (%d ms): %w", req.TtlMs, millis.Max, session.ErrInvalidTTL)
	}
	if le := (*session.LimitError)(nil); errors.As(err, &le) {
		if le.Total {
			s.metrics.limits.Count(limit.Sessions)
		} else {
			s.metrics.limits.Count(limit.SessionsPerIdentity)
		}
	}
	code, msg := statusOf(err)
	if err != nil {
		return &bfspb.OpenSessionResponse{Status: code, Message: msg}, nil
	}
	return &bfspb.OpenSessionResponse{Status: code, SessionId: string(sess.ID), TtlMs: sess.TTL.Milliseconds()}, nil
}

// KeepAlive renews a session for another TTL.
func (srv *Server) KeepAlive(ctx context.Context, req *bfspb.KeepAliveRequest) (*bfspb.KeepAliveResponse, error) {
	s, notLeader := leading[*bfspb.KeepAliveResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	// Renewed only by a leader a majority still follows: a deposed one
	// whose clients still reach it grants nothing.
	err := s.verify()
	var ttl time.Duration
	if err == nil {
		ttl, err = s.sessions.KeepAlive(session.ID(req.SessionId))
	}
	code, msg := statusOf(err)
	return &bfspb.KeepAliveResponse{Status: code, Message: msg, TtlMs: ttl.Milliseconds()}, nil
}

// CloseSession ends a session now.
func (srv *Server) CloseSession(ctx context.Context, req *bfspb.CloseSessionRequest) (*bfspb.CloseSessionResponse, error) {
	s, notLeader := leading[*bfspb.CloseSessionResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	err := s.sessions.CloseSession(ctx, session.ID(req.SessionId))
	code, msg := statusOf(err)
	return &bfspb.CloseSessionResponse{Status: code, Message: msg}, nil
}
