package sdk_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/sdk"
)

// TestCertificates: a client of a cluster with TLS presents a certificate
// of the cluster's CA; without one, or with another CA's, it is refused;
// a certificate that is not there fails Dial.
func TestCertificates(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	ctx := context.Background()

	c := dial(t, cl.NameServerAddr, sdk.WithCertsDir(cl.CertsDir(), certs.ClientUser))
	require.NoError(t, c.Mkdir(ctx, "/a", 0o755))
	w, err := c.Create(ctx, "/a/f")
	require.NoError(t, err)
	_, err = w.Write([]byte("over TLS"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	admin := dial(t, cl.NameServerAddr, cl.AsAdmin())
	_, err = admin.Stat(ctx, "/a/f")
	require.NoError(t, err)

	plain := dial(t, cl.NameServerAddr)
	_, err = plain.Stat(ctx, "/a")
	require.ErrorIs(t, err, sdk.ErrUnavailable)

	other, err := sandbox.Start(sandbox.Config{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	stranger := dial(t, cl.NameServerAddr, other.AsClient())
	_, err = stranger.Stat(ctx, "/a")
	require.ErrorIs(t, err, sdk.ErrUnavailable)

	_, err = sdk.Dial(ctx, cl.NameServerAddr, sdk.WithCertsDir(filepath.Join(t.TempDir(), "none"), certs.ClientUser))
	require.ErrorContains(t, err, "no such file")
	_, err = sdk.Dial(ctx, cl.NameServerAddr, sdk.WithCertsDir(cl.CertsDir(), "nobody"))
	require.ErrorContains(t, err, "client.nobody.crt")
}
