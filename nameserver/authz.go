package nameserver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Who may do what (SPEC §10). Every request passes the authorize
// interceptors, the one place the caller's identity is checked against
// what it asks:
//
//   - a request that names a session (any request message with a
//     session_id field, found from the service's descriptors, so a new
//     one is checked without being listed here) comes from the identity
//     that opened the session; an admin may also name any session in a
//     request that does not act for it (a listing's or a watch's filter,
//     a forced unlock);
//   - the requests of privileged need an admin (PublishMember a node or
//     an admin);
//   - every session id in an answer is shown whole only to the session's
//     owner and to admins (conceal.go).
//
// The checks need no lock against the apply step: a session's owner is
// stored with it when it opens and never changes, and ids are never
// reused, so the owner read before a command applies is the owner of the
// session the command acts for, if that session is still live when it
// applies (the apply step checks that, as before).
//
// A session record stored before owners were recorded has none: any
// identity may use it, as every identity could then, so a nameserver
// upgraded under running clients does not take their sessions (and their
// locks) away. Such sessions end with their clients; the sessions opened
// since all have owners. Their ids are shown whole to admins only.
//
// An insecure nameserver has no identities: every caller is anonymous,
// an admin (its operator chose to run without authentication, and it
// says so loudly at start), so the sandbox and tests run insecure work as
// before; the sessions opened there are owned by anonymous.

// anonymous is every caller of an insecure nameserver.
var anonymous = certs.Identity{Kind: certs.KindAdmin, Name: "anonymous"}

// errDenied is wrapped by every refusal of who the caller is.
var errDenied = errors.New("permission denied")

// deniedError refuses a request its caller's identity may not make.
type deniedError struct {
	caller certs.Identity // the zero Identity: none was verified
	what   string         // what it asked
	need   string         // who may
}

func (e *deniedError) Error() string {
	who := "a caller without a verified identity"
	if e.caller.Kind != 0 {
		who = e.caller.String()
	}
	return fmt.Sprintf("%v: %s may not %s: %s", errDenied, who, e.what, e.need)
}

func (e *deniedError) Unwrap() error { return errDenied }

// needAdmin is what an admin-only request tells its caller it lacks.
const needAdmin = "that needs an admin identity (a certificate made with bfs cert create-client NAME --admin; the sandbox's is \"admin\")"

// privilege is what a request of a privileged method asks, for the
// refusal ("" for a request of it that anyone may make), and whether a
// node may ask it besides an admin.
type privilege struct {
	what func(req any) string
	node bool
}

// privileged holds the methods only an admin (or a node) may call, or
// whose requests of some kind only an admin may make. Chunkservers are
// nodes: they are no admins.
var privileged = map[string]privilege{
	bfspb.NameServer_UnlockDir_FullMethodName:        {what: when((*bfspb.UnlockDirRequest).GetForce, "force a directory's unlock")},
	bfspb.NameServer_LockDir_FullMethodName:          {what: when((*bfspb.LockDirRequest).GetOperator, "take an operator lock")},
	bfspb.NameServer_LeaveSafeMode_FullMethodName:    {what: always("leave safe mode")},
	bfspb.NameServer_Decommission_FullMethodName:     {what: decommissionWhat},
	bfspb.NameServer_ListChunkservers_FullMethodName: {what: always("list the chunkservers")},
	bfspb.NameServer_AddMember_FullMethodName:        {what: always("add a member to the nameserver group")},
	bfspb.NameServer_RemoveMember_FullMethodName:     {what: always("remove a member from the nameserver group")},
	bfspb.NameServer_TransferLeader_FullMethodName:   {what: always("transfer the group's leadership")},
	// Each member publishes its own addresses; clients are sent there.
	bfspb.NameServer_PublishMember_FullMethodName: {what: always("publish a member's addresses"), node: true},
}

func always(what string) func(any) string { return func(any) string { return what } }

// when is what for the requests of type R that pred holds for.
func when[R any](pred func(R) bool, what string) func(any) string {
	return func(req any) string {
		if r, ok := req.(R); ok && pred(r) {
			return what
		}
		return ""
	}
}

func decommissionWhat(req any) string {
	if r, ok := req.(*bfspb.DecommissionRequest); ok && r.GetCancel() {
		return "cancel a decommission"
	}
	return "decommission chunkservers"
}

// sessionFields are, by method, the session_id field of its request.
var sessionFields = func() map[string]protoreflect.FieldDescriptor {
	out := map[string]protoreflect.FieldDescriptor{}
	sd := bfspb.File_nameserver_proto.Services().ByName("NameServer")
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		if fd := m.Input().Fields().ByName("session_id"); fd != nil && fd.Kind() == protoreflect.StringKind {
			out[fmt.Sprintf("/%s/%s", sd.FullName(), m.Name())] = fd
		}
	}
	return out
}()

// sessionNamed is the session req names ("" if none).
func sessionNamed(method string, req any) string {
	fd, ok := sessionFields[method]
	m, isMsg := req.(proto.Message)
	if !ok || !isMsg {
		return ""
	}
	return m.ProtoReflect().Get(fd).String()
}

// actsFor reports whether req, naming a session, acts for it; the
// others (a filter, a forced unlock) an admin may make naming any.
func actsFor(method string, req any) bool {
	switch r := req.(type) {
	case *bfspb.ListDirLocksRequest, *bfspb.WatchDirLocksRequest:
		return false
	case *bfspb.UnlockDirRequest:
		return !r.GetForce()
	}
	return true
}

// callerOf is who sent the request of ctx: its verified identity, or
// anonymous on an insecure nameserver. False on a secure nameserver for
// a request without one (a call made in-process).
func (s *Server) callerOf(ctx context.Context) (certs.Identity, bool) {
	if id, ok := certs.PeerIdentity(ctx); ok {
		return id, true
	}
	if s.cfg.TLS == nil {
		return anonymous, true
	}
	return certs.Identity{}, false
}

// check decides whether caller may make req of method, and returns the
// session req names.
func (s *Server) check(caller certs.Identity, method string, req any) (named string, err error) {
	if p, ok := privileged[method]; ok {
		if what := p.what(req); what != "" && !mayPrivileged(caller, p) {
			return "", &deniedError{caller: caller, what: what, need: needAdmin}
		}
	}
	named = sessionNamed(method, req)
	if named == "" || (caller.Kind == certs.KindAdmin && !actsFor(method, req)) {
		return named, nil
	}
	return named, s.checkOwner(caller, named)
}

func mayPrivileged(caller certs.Identity, p privilege) bool {
	return caller.Kind == certs.KindAdmin || (p.node && caller.Kind == certs.KindNode)
}

// checkOwner refuses a request naming session id from any identity but
// the one that opened it. A session the store does not hold is left to
// the handler, which answers it expired.
func (s *Server) checkOwner(caller certs.Identity, id string) error {
	rec, err := s.ns.Session(id)
	switch {
	case errors.Is(err, namespace.ErrSessionExpired):
		return nil
	case err != nil:
		return err
	case rec.Owner == "" || rec.Owner == caller.String():
		return nil // an owner-less record is older than owners: see above
	}
	return &deniedError{caller: caller, what: "use session " + session.ID(id).Short(),
		need: fmt.Sprintf("it belongs to %s (a session is used only by the identity that opened it)", rec.Owner)}
}

// authorize is the unary interceptor that checks who may make a request
// (see above) and hides, in its answer, the session ids the caller may
// not see. A refused request is answered with its method's response,
// status PERMISSION_DENIED and why.
func (s *Server) authorize(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	caller, named, err := s.admit(ctx, info.FullMethod, req)
	if err != nil {
		code, msg := statusOf(err)
		mt, ok := notLeaderAnswers[info.FullMethod]
		if !ok {
			return nil, status.Error(grpcCode(code), msg)
		}
		return statusAnswer(mt.New(), code, msg).Interface(), nil
	}
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err
	}
	return s.conceal(caller, named, resp), nil
}

// admit is who sent req, of method, with the session it names, or why
// the caller may not send it.
func (s *Server) admit(ctx context.Context, method string, req any) (caller certs.Identity, named string, err error) {
	caller, ok := s.callerOf(ctx)
	if !ok {
		return caller, "", &deniedError{what: "call " + method, need: "every request needs a verified client certificate"}
	}
	named, err = s.check(caller, method, req)
	return caller, named, err
}

// authorizeStream is authorize for the streams (WatchDirLocks): the
// request is checked as it is received, a refusal ends the stream with
// the gRPC code of its status, and every message sent is concealed.
func (s *Server) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &authzStream{ServerStream: ss, s: s, method: info.FullMethod})
}

type authzStream struct {
	grpc.ServerStream
	s      *Server
	method string
	// Who sent the request and the session it named, once received,
	// and how the caller views session ids (nil for an admin).
	caller certs.Identity
	named  string
	viewer *viewer
}

func (a *authzStream) RecvMsg(m any) error {
	if err := a.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	caller, named, err := a.s.admit(a.Context(), a.method, m)
	if err != nil {
		code, msg := statusOf(err)
		return status.Error(grpcCode(code), msg)
	}
	a.caller, a.named = caller, named
	if caller.Kind != certs.KindAdmin {
		a.viewer = &viewer{s: a.s, caller: caller.String(), named: named}
	}
	return nil
}

func (a *authzStream) SendMsg(m any) error {
	if a.viewer != nil {
		m = a.s.concealFor(a.viewer, m)
	}
	return a.ServerStream.SendMsg(m)
}

// grpcCode is the gRPC code a stream ends with for a refusal of status
// code: a stream's messages carry no status of their own.
func grpcCode(code bfspb.StatusCode) codes.Code {
	switch code {
	case bfspb.StatusCode_PERMISSION_DENIED:
		return codes.PermissionDenied
	case bfspb.StatusCode_INTERNAL:
		return codes.Internal
	}
	return codes.Unavailable
}
