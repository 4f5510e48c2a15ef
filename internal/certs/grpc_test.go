package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// server is a gRPC server (the health service) with mutual TLS from a
// node's Creds, recording the identity each RPC's context carries.
type server struct {
	addr string
	mu   sync.Mutex
	seen []Identity
}

func startServer(t *testing.T, creds *Creds) *server {
	t.Helper()
	s := &server{}
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		id, ok := PeerIdentity(ctx)
		require.True(t, ok)
		s.mu.Lock()
		s.seen = append(s.seen, id)
		s.mu.Unlock()
		return h(ctx, req)
	}
	g := grpc.NewServer(grpc.Creds(TransportCredentials(creds)),
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(true), record),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(true)))
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.addr = lis.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return s
}

func (s *server) last() Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return Identity{}
	}
	return s.seen[len(s.seen)-1]
}

// check makes a new connection with opts, calls the health service once
// and returns the server's identity as the client saw it.
func check(t *testing.T, addr string, opts ...grpc.DialOption) (Identity, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	if err != nil {
		return Identity{}, err
	}
	ai, ok := p.AuthInfo.(AuthInfo)
	require.True(t, ok, "%T", p.AuthInfo)
	return ai.Identity, nil
}

func creds(t *testing.T, c *Creds, err error) grpc.DialOption {
	t.Helper()
	require.NoError(t, err)
	return grpc.WithTransportCredentials(TransportCredentials(c))
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	node, err := LoadNode(p.dir)
	require.NoError(t, err)
	s := startServer(t, node)

	alice, err := LoadClient(p.dir, "alice")
	srv, err := check(t, s.addr, creds(t, alice, err))
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindNode, Name: "127.0.0.1", Role: RoleNameServer}, srv)
	require.Equal(t, Identity{Kind: KindClient, Name: "alice"}, s.last())

	root, err := LoadClient(p.dir, "root")
	_, err = check(t, s.addr, creds(t, root, err))
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindAdmin, Name: "root"}, s.last())

	// A node dials another with its own certificate; "localhost" is in it too.
	_, err = check(t, "localhost:"+port(s.addr), creds(t, node, nil))
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindNode, Name: "127.0.0.1", Role: RoleNameServer}, s.last())
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func TestRefusedClients(t *testing.T) {
	p := newPKI(t)
	node, err := LoadNode(p.dir)
	require.NoError(t, err)
	s := startServer(t, node)
	alice, err := LoadClient(p.dir, "alice")
	require.NoError(t, err)

	// Plaintext.
	_, err = check(t, s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	// TLS without a client certificate.
	noCert := alice.ClientConfig("127.0.0.1")
	noCert.Certificates = nil
	conn, err := tls.Dial("tcp", s.addr, noCert)
	require.NoError(t, err) // TLS 1.3: the client learns of the refusal on its first read
	_, err = conn.Read(make([]byte, 1))
	require.ErrorContains(t, err, "certificate required")
	conn.Close()

	// TLS 1.2.
	old := alice.ClientConfig("127.0.0.1")
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	_, err = tls.Dial("tcp", s.addr, old)
	require.ErrorContains(t, err, "protocol version")

	// A certificate of another CA, both ways.
	other := newPKI(t)
	stranger, err := LoadClient(other.dir, "alice")
	_, err = check(t, s.addr, creds(t, stranger, err))
	require.Error(t, err)
	require.Equal(t, codes.Unavailable, status.Code(err))

	// A certificate of the CA naming no identity.
	anon := alice.ClientConfig("127.0.0.1")
	anon.Certificates = []tls.Certificate{p.anonymous(t)}
	_, err = check(t, s.addr, grpc.WithTransportCredentials(credentials.NewTLS(anon)))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	require.Empty(t, s.seen)
}

// anonymous is a client certificate signed by the CA that names no
// identity.
func (p *pki) anonymous(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "anonymous"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca.cert, key.Public(), p.ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestClientRequiresNodeServer(t *testing.T) {
	p := newPKI(t)
	// A server presenting an admin's certificate: it cannot serve (no
	// server auth), and a client would not take it as a node anyway.
	root, err := LoadClient(p.dir, "root")
	require.NoError(t, err)
	s := startServer(t, root)
	alice, err := LoadClient(p.dir, "alice")
	_, err = check(t, s.addr, creds(t, alice, err))
	require.Error(t, err)
	require.Equal(t, codes.Unavailable, status.Code(err))
}

func TestUnaryInterceptorRequiresIdentity(t *testing.T) {
	h := func(ctx context.Context, _ any) (any, error) {
		_, ok := PeerIdentity(ctx)
		return ok, nil
	}
	_, err := UnaryServerInterceptor(true)(context.Background(), nil, nil, h)
	require.Equal(t, codes.Unauthenticated, status.Code(err))
	got, err := UnaryServerInterceptor(false)(context.Background(), nil, nil, h)
	require.NoError(t, err)
	require.Equal(t, false, got)
	err = StreamServerInterceptor(true)(nil, fakeStream{ctx: context.Background()}, nil, func(any, grpc.ServerStream) error { return nil })
	require.Equal(t, codes.Unauthenticated, status.Code(err))
}

// fakeStream has only the context the interceptor looks at.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f fakeStream) Context() context.Context { return f.ctx }

func TestRotationWithoutRestart(t *testing.T) {
	p := newPKI(t)
	node, err := LoadNode(p.dir)
	require.NoError(t, err)
	s := startServer(t, node)
	alice, err := LoadClient(p.dir, "alice")
	require.NoError(t, err)
	aliceDial := creds(t, alice, nil)
	srv, err := check(t, s.addr, aliceDial)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", srv.Name)

	// A new node certificate: the next connection gets it.
	require.NoError(t, p.ca.CreateNode(p.dir, RoleNameServer, "rotated", []string{"127.0.0.1"}, Options{Overwrite: true}))
	srv, err = check(t, s.addr, aliceDial)
	require.NoError(t, err)
	require.Equal(t, "rotated", srv.Name)

	// A file that does not load leaves the certificates in use.
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, NodeCertFile), []byte("garbage"), 0o644))
	srv, err = check(t, s.addr, aliceDial)
	require.NoError(t, err)
	require.Equal(t, "rotated", srv.Name)

	// A new CA, and everything issued again under it. A client that
	// kept the old CA and certificate is refused; the client reading the
	// directory has the new ones at its next connection.
	oldDir := t.TempDir()
	for _, f := range []string{CAFile, ClientCertFile("alice"), ClientKeyFile("alice")} {
		copyFile(t, filepath.Join(p.dir, f), filepath.Join(oldDir, f))
	}
	stale, err := LoadClient(oldDir, "alice")
	require.NoError(t, err)
	require.NoError(t, CreateCA(p.dir, p.caKey, Options{Overwrite: true}))
	ca, err := LoadAuthority(p.dir, p.caKey)
	require.NoError(t, err)
	require.NoError(t, ca.CreateNode(p.dir, RoleNameServer, "new-ca", []string{"127.0.0.1"}, Options{Overwrite: true}))
	require.NoError(t, ca.CreateClient(p.dir, Identity{Kind: KindClient, Name: "alice"}, Options{Overwrite: true}))
	_, err = check(t, s.addr, creds(t, stale, nil))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	srv, err = check(t, s.addr, aliceDial)
	require.NoError(t, err)
	require.Equal(t, "new-ca", srv.Name)
	require.Equal(t, Identity{Kind: KindClient, Name: "alice"}, s.last())
}

func TestRaftHookConfigs(t *testing.T) {
	p := newPKI(t)
	node, err := LoadNode(p.dir)
	require.NoError(t, err)
	lis, err := tls.Listen("tcp", "127.0.0.1:0", node.ServerConfig())
	require.NoError(t, err)
	defer lis.Close()
	got := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err == nil {
			_, err = io.ReadFull(c, make([]byte, 2))
			c.Close()
		}
		got <- err
	}()
	c, err := tls.Dial("tcp", lis.Addr().String(), node.ClientConfig("127.0.0.1"))
	require.NoError(t, err)
	_, err = c.Write([]byte("ok"))
	require.NoError(t, err)
	require.NoError(t, <-got)
	require.Equal(t, uint16(tls.VersionTLS13), c.ConnectionState().Version)
	c.Close()
}

func TestHTTPS(t *testing.T) {
	p := newPKI(t)
	node, err := LoadNode(p.dir)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: IdentifyHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := PeerIdentity(r.Context())
		require.True(t, ok)
		io.WriteString(w, id.String())
	})), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); hs.Serve(tls.NewListener(lis, node.ServerConfig())) }()
	defer func() { hs.Close(); <-done }()

	alice, err := LoadClient(p.dir, "alice")
	require.NoError(t, err)
	tr := &http.Transport{TLSClientConfig: alice.ClientConfig("127.0.0.1")}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + lis.Addr().String() + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "client/alice", string(body))

	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	resp, err = (&http.Client{Transport: plain}).Get("http://" + lis.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode) // Go's answer to HTTP on a TLS port
	}
}
