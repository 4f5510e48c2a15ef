package testcluster_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

// freeAddr is a loopback address nothing listens on (for a metrics port).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	return lis.Addr().String()
}

// health checks the health service at addr over a new connection made
// with opts; it returns the server's identity when the call succeeded.
func health(t *testing.T, addr string, opts ...grpc.DialOption) (certs.Identity, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	if err != nil {
		return certs.Identity{}, err
	}
	ai, _ := p.AuthInfo.(certs.AuthInfo)
	return ai.Identity, nil
}

// TestEveryPortRefusesPlaintext: each port of a secure cluster (the
// nameserver's and a chunkserver's gRPC and metrics ports) answers a
// client with the cluster's certificate, and refuses plaintext and a TLS
// client without a certificate.
func TestEveryPortRefusesPlaintext(t *testing.T) {
	nsMetrics, csMetrics := freeAddr(t), freeAddr(t)
	c := testcluster.Start(t, testcluster.WithChunkservers(1),
		testcluster.WithNameServerConfig(func(cfg *nameserver.Config) { cfg.MetricsAddr = nsMetrics }),
		testcluster.WithChunkserverConfig(func(_ int, cfg *chunkserver.Config) { cfg.MetricsAddr = csMetrics }))
	client, err := certs.LoadClient(c.CertsDir(), certs.ClientUser)
	require.NoError(t, err)
	noCert := client.ClientConfig("")
	noCert.Certificates = nil

	for _, addr := range []string{c.NameServerAddr, c.ChunkserverAddrs()[0]} {
		id, err := health(t, addr, c.DialOption())
		require.NoError(t, err, addr)
		require.Equal(t, certs.KindNode, id.Kind)
		_, err = health(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.Equal(t, codes.Unavailable, status.Code(err), "plaintext to %s: %v", addr, err)
		_, err = health(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(noCert)))
		require.Equal(t, codes.Unavailable, status.Code(err), "no client certificate to %s: %v", addr, err)
	}

	for _, addr := range []string{nsMetrics, csMetrics} {
		require.Contains(t, c.Metrics(addr), "_rpcs_total", addr)
		plain := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		resp, err := plain.Get("http://" + addr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to %s", addr)
			require.NotContains(t, string(body), "_rpcs_total")
		}
		tr := &http.Transport{TLSClientConfig: noCert}
		_, err = (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/metrics")
		tr.CloseIdleConnections()
		require.Error(t, err, "HTTPS without a client certificate to %s", addr)
	}
}

// TestRotatedCertificateWithoutRestart: a node certificate replaced
// under a running cluster is what the next connection gets, and the
// chunkservers keep their registration.
func TestRotatedCertificateWithoutRestart(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithChunkservers(1))
	id, err := health(t, c.NameServerAddr, c.DialOption())
	require.NoError(t, err)
	require.Equal(t, certs.Identity{Kind: certs.KindNode, Name: "127.0.0.1", Role: certs.RoleNameServer}, id)
	id, err = health(t, c.ChunkserverAddrs()[0], c.DialOption())
	require.NoError(t, err)
	require.Equal(t, certs.Identity{Kind: certs.KindNode, Name: "chunkserver-0", Role: certs.RoleChunkserver}, id)
	ca := c.Authority()
	require.NoError(t, ca.CreateNode(c.CertsDir(), certs.RoleNameServer, "rotated", []string{"127.0.0.1"}, certs.Options{Overwrite: true}))
	require.NoError(t, ca.CreateNodeFiles(c.CertsDir(), sandbox.ChunkserverCertFile(0), sandbox.ChunkserverKeyFile(0),
		certs.RoleChunkserver, "rotated-cs", []string{"127.0.0.1"}, certs.Options{Overwrite: true}))
	for addr, want := range map[string]certs.Identity{
		c.NameServerAddr:        {Kind: certs.KindNode, Name: "rotated", Role: certs.RoleNameServer},
		c.ChunkserverAddrs()[0]: {Kind: certs.KindNode, Name: "rotated-cs", Role: certs.RoleChunkserver},
	} {
		id, err := health(t, addr, c.DialOption())
		require.NoError(t, err)
		require.Equal(t, want, id, addr)
	}
	require.Equal(t, 1, c.NameServer().LiveChunkservers())
}

// TestInsecureCluster: an insecure cluster speaks plaintext only.
func TestInsecureCluster(t *testing.T) {
	c := testcluster.Start(t, testcluster.Insecure())
	require.Empty(t, c.CertsDir())
	_, err := health(t, c.NameServerAddr, c.DialOption())
	require.NoError(t, err)
	_, err = health(t, c.NameServerAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	require.Error(t, err)
}
