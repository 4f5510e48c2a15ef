package certs

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// AuthInfo is what gRPC knows of a peer that these credentials
// authenticated: the TLS state and the identity its certificate names.
type AuthInfo struct {
	credentials.TLSInfo
	Identity Identity
}

// transport is gRPC's side of Creds: every handshake runs on a TLS
// configuration made from the certificates as they are on disk then.
type transport struct {
	c *Creds
	// serverName overrides the host of the address dialed as the name
	// the server's certificate must hold.
	serverName string
}

// TransportCredentials are gRPC's credentials of mutual TLS with c, for a
// server and for a client alike (a client requires the server to be a
// node). A nil c means plaintext: a daemon or a tool run with --insecure.
func TransportCredentials(c *Creds) credentials.TransportCredentials {
	if c == nil {
		return insecure.NewCredentials()
	}
	return &transport{c: c}
}

func (t *transport) ClientHandshake(ctx context.Context, authority string, rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	raw := newBatchConn(rawConn)
	conn, ai, err := credentials.NewTLS(t.c.current().clientConfig(t.serverName)).ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	return withIdentity(&batchedTLS{Conn: conn, raw: raw}, ai)
}

func (t *transport) ServerHandshake(rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	raw := newBatchConn(rawConn)
	conn, ai, err := credentials.NewTLS(t.c.current().serverConfig()).ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return withIdentity(&batchedTLS{Conn: conn, raw: raw}, ai)
}

// withIdentity adds the peer's identity to the AuthInfo of a handshake
// (the TLS configuration checked that there is one).
func withIdentity(conn net.Conn, ai credentials.AuthInfo) (net.Conn, credentials.AuthInfo, error) {
	info, ok := ai.(credentials.TLSInfo)
	if !ok {
		conn.Close()
		return nil, nil, fmt.Errorf("certs: TLS handshake gave %T", ai)
	}
	id, err := peerIdentity(info.State)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, AuthInfo{TLSInfo: info, Identity: id}, nil
}

func (t *transport) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (t *transport) Clone() credentials.TransportCredentials {
	c := *t
	return &c
}

// OverrideServerName is gRPC's deprecated way to set the server name.
func (t *transport) OverrideServerName(name string) error {
	t.serverName = name
	return nil
}

type identityKey struct{}

// WithIdentity returns ctx carrying id as the peer's identity.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// PeerIdentity is the verified identity of the peer whose request ctx
// belongs to (put there by the interceptors or IdentifyHTTP); false on a
// server without TLS.
func PeerIdentity(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// grpcIdentity is the identity gRPC's peer information of ctx holds.
func grpcIdentity(ctx context.Context) (Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, false
	}
	ai, ok := p.AuthInfo.(AuthInfo)
	return ai.Identity, ok
}

// errNoIdentity refuses an RPC without a verified peer on a secure server.
var errNoIdentity = status.Error(codes.Unauthenticated, "no verified client certificate")

// UnaryServerInterceptor puts the peer's identity in the context of every
// unary RPC. With required (a server with TLS) an RPC without one is
// refused as Unauthenticated.
func UnaryServerInterceptor(required bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		id, ok := grpcIdentity(ctx)
		if !ok {
			if required {
				return nil, errNoIdentity
			}
			return handler(ctx, req)
		}
		return handler(WithIdentity(ctx, id), req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor(required bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		id, ok := grpcIdentity(ss.Context())
		if !ok {
			if required {
				return errNoIdentity
			}
			return handler(srv, ss)
		}
		return handler(srv, &identityStream{ServerStream: ss, ctx: WithIdentity(ss.Context(), id)})
	}
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// IdentifyHTTP puts the identity of the client's verified certificate in
// the context of every request h serves over TLS (PeerIdentity reads it);
// a TLS request without one is refused. Requests over plain HTTP pass
// without an identity.
func IdentifyHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			h.ServeHTTP(w, r)
			return
		}
		id, err := peerIdentity(*r.TLS)
		if err != nil {
			http.Error(w, "no verified client certificate", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	})
}
