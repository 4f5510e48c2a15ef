package certs

import (
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

// pki is a certificates directory with a CA, a node certificate for
// 127.0.0.1 and localhost, a client alice and an admin root.
type pki struct {
	dir, caKey string
	ca         *Authority
}

func newPKI(t *testing.T) *pki { return newPKIB(t) }

func newPKIB(t testing.TB) *pki {
	t.Helper()
	p := &pki{dir: filepath.Join(t.TempDir(), "certs"), caKey: filepath.Join(t.TempDir(), "ca.key")}
	require.NoError(t, CreateCA(p.dir, p.caKey, Options{}))
	var err error
	p.ca, err = LoadAuthority(p.dir, p.caKey)
	require.NoError(t, err)
	require.NoError(t, p.ca.CreateNode(p.dir, RoleNameServer, "", []string{"127.0.0.1", "localhost"}, Options{}))
	require.NoError(t, p.ca.CreateClient(p.dir, Identity{Kind: KindClient, Name: "alice"}, Options{}))
	require.NoError(t, p.ca.CreateClient(p.dir, Identity{Kind: KindAdmin, Name: "root"}, Options{}))
	return p
}

func TestCreateAndLoad(t *testing.T) {
	p := newPKI(t)
	node, err := LoadNode(p.dir)
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindNode, Name: "127.0.0.1", Role: RoleNameServer}, node.Identity())
	require.Equal(t, "nameserver/127.0.0.1", node.Identity().String())
	alice, err := LoadClient(p.dir, "alice")
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindClient, Name: "alice"}, alice.Identity())
	root, err := LoadClient(p.dir, "root")
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindAdmin, Name: "root"}, root.Identity())
	require.WithinDuration(t, time.Now().Add(DefaultCertLifetime), root.NotAfter(), time.Minute)

	// Keys are the owner's alone; certificates are readable.
	for _, f := range []string{NodeKeyFile, ClientKeyFile("alice"), ClientKeyFile("root")} {
		fi, err := os.Stat(filepath.Join(p.dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	fi, err := os.Stat(p.caKey)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	infos, err := List(p.dir)
	require.NoError(t, err)
	var got []string
	for _, in := range infos {
		require.NoError(t, in.Err)
		got = append(got, in.File+" "+in.Identity.String()+" "+strings.Join(in.Hosts, ",")+" "+in.KeyFile)
	}
	require.Equal(t, []string{
		"ca.crt Kind(0)/  ",
		"client.alice.crt client/alice  client.alice.key",
		"client.root.crt admin/root  client.root.key",
		"node.crt nameserver/127.0.0.1 localhost,127.0.0.1 node.key",
	}, got)
	require.True(t, infos[0].CA)
}

func TestKeyReadableByOthersIsRefused(t *testing.T) {
	p := newPKI(t)
	require.NoError(t, os.Chmod(filepath.Join(p.dir, NodeKeyFile), 0o640))
	_, err := LoadNode(p.dir)
	require.ErrorIs(t, err, ErrKeyReadable)
	require.ErrorContains(t, err, "chmod 600")
	require.NoError(t, os.Chmod(filepath.Join(p.dir, ClientKeyFile("alice")), 0o604))
	_, err = LoadClient(p.dir, "alice")
	require.ErrorIs(t, err, ErrKeyReadable)
	require.NoError(t, os.Chmod(p.caKey, 0o644))
	_, err = LoadAuthority(p.dir, p.caKey)
	require.ErrorIs(t, err, ErrKeyReadable)
}

func TestExistingFilesAreKept(t *testing.T) {
	p := newPKI(t)
	before, err := os.ReadFile(filepath.Join(p.dir, NodeCertFile))
	require.NoError(t, err)
	require.ErrorContains(t, p.ca.CreateNode(p.dir, RoleNameServer, "", []string{"10.0.0.1"}, Options{}), "exists")
	require.ErrorContains(t, p.ca.CreateClient(p.dir, Identity{Kind: KindClient, Name: "alice"}, Options{}), "exists")
	require.ErrorContains(t, CreateCA(p.dir, filepath.Join(t.TempDir(), "other.key"), Options{}), "exists")
	after, err := os.ReadFile(filepath.Join(p.dir, NodeCertFile))
	require.NoError(t, err)
	require.Equal(t, before, after)

	require.NoError(t, p.ca.CreateNode(p.dir, RoleNameServer, "ns1", []string{"10.0.0.1"}, Options{Overwrite: true}))
	node, err := LoadNode(p.dir)
	require.NoError(t, err)
	require.Equal(t, Identity{Kind: KindNode, Name: "ns1", Role: RoleNameServer}, node.Identity())
}

func TestBadInput(t *testing.T) {
	p := newPKI(t)
	for _, h := range []string{"", "host:80", "https://x", "*.example.com", "a..b", "-a", "a b"} {
		require.Error(t, p.ca.CreateNode(t.TempDir(), RoleNameServer, "", []string{h}, Options{}), "host %q", h)
	}
	require.ErrorContains(t, p.ca.CreateNode(t.TempDir(), RoleNameServer, "", nil, Options{}), "at least one host")
	require.ErrorContains(t, p.ca.CreateNode(t.TempDir(), RoleNameServer, "", []string{"fe80::1%eth0"}, Options{}), "not an IP address")
	for _, n := range []string{"", ".hidden", "-x", "a/b", "a b", "é", strings.Repeat("x", 129), "new\nline"} {
		require.Error(t, p.ca.CreateClient(t.TempDir(), Identity{Kind: KindClient, Name: n}, Options{}), "name %q", n)
		_, err := LoadClient(p.dir, n)
		require.Error(t, err, "name %q", n)
	}
	require.ErrorContains(t, p.ca.CreateClient(t.TempDir(), Identity{Kind: KindNode, Name: "x"}, Options{}), "not a node")
	require.ErrorContains(t, p.ca.CreateClient(t.TempDir(), Identity{Kind: KindClient, Name: "x"}, Options{Lifetime: 2 * DefaultCALifetime}), "outlive its CA")
	require.ErrorContains(t, p.ca.CreateClient(t.TempDir(), Identity{Kind: KindClient, Name: "x"}, Options{Lifetime: -time.Hour}), "negative")
	_, err := LoadAuthority(p.dir, filepath.Join(p.dir, NodeKeyFile))
	require.ErrorContains(t, err, "no CA certificate")
	_, err = LoadClient(p.dir, "nobody")
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestWrongKindOrCAIsRefused(t *testing.T) {
	p := newPKI(t)
	// A client certificate in the node's place.
	dir := t.TempDir()
	copyFile(t, filepath.Join(p.dir, CAFile), filepath.Join(dir, CAFile))
	copyFile(t, filepath.Join(p.dir, ClientCertFile("alice")), filepath.Join(dir, NodeCertFile))
	copyFile(t, filepath.Join(p.dir, ClientKeyFile("alice")), filepath.Join(dir, NodeKeyFile))
	_, err := LoadNode(dir)
	require.ErrorContains(t, err, "not a node")
	// The node's certificate in a client's place.
	copyFile(t, filepath.Join(p.dir, NodeCertFile), filepath.Join(dir, ClientCertFile("n")))
	copyFile(t, filepath.Join(p.dir, NodeKeyFile), filepath.Join(dir, ClientKeyFile("n")))
	_, err = LoadClient(dir, "n")
	require.ErrorContains(t, err, "not a client or admin")
	// Another CA.
	other := newPKI(t)
	copyFile(t, filepath.Join(other.dir, CAFile), filepath.Join(dir, CAFile))
	copyFile(t, filepath.Join(p.dir, NodeCertFile), filepath.Join(dir, NodeCertFile))
	copyFile(t, filepath.Join(p.dir, NodeKeyFile), filepath.Join(dir, NodeKeyFile))
	_, err = LoadNode(dir)
	require.ErrorContains(t, err, "does not verify")
	// A key that is not the certificate's.
	copyFile(t, filepath.Join(p.dir, CAFile), filepath.Join(dir, CAFile))
	copyFile(t, filepath.Join(other.dir, NodeKeyFile), filepath.Join(dir, NodeKeyFile))
	_, err = LoadNode(dir)
	require.ErrorContains(t, err, "private key does not match")
}

func TestExpiredCertificateIsRefused(t *testing.T) {
	p := newPKI(t)
	long := func() time.Time { return time.Now().Add(-48 * time.Hour) }
	require.NoError(t, p.ca.CreateNode(p.dir, RoleNameServer, "", []string{"127.0.0.1"}, Options{Overwrite: true, Now: long, Lifetime: time.Hour}))
	_, err := LoadNode(p.dir)
	require.ErrorContains(t, err, "expired")
}

func TestIdentityOf(t *testing.T) {
	for _, tc := range []struct {
		uris []string
		want Identity
		err  string
	}{
		{[]string{"bfs://node/ns1"}, Identity{Kind: KindNode, Name: "ns1"}, ""},
		{[]string{"bfs://nameserver/ns1"}, Identity{Kind: KindNode, Name: "ns1", Role: RoleNameServer}, ""},
		{[]string{"bfs://chunkserver/cs1"}, Identity{Kind: KindNode, Name: "cs1", Role: RoleChunkserver}, ""},
		{[]string{"bfs://admin/root", "spiffe://x/y"}, Identity{Kind: KindAdmin, Name: "root"}, ""},
		{[]string{"bfs://client/::1"}, Identity{Kind: KindClient, Name: "::1"}, ""},
		{nil, Identity{}, "no bfs:// URI"},
		{[]string{"spiffe://x/y"}, Identity{}, "no bfs:// URI"},
		{[]string{"bfs://node/a", "bfs://admin/b"}, Identity{}, "2 bfs:// URIs"},
		{[]string{"bfs://root/x"}, Identity{}, "malformed"},
		{[]string{"bfs://node/"}, Identity{}, "empty name"},
		{[]string{"bfs://node/a/b"}, Identity{}, "'/'"},
		{[]string{"bfs://node/a?x=1"}, Identity{}, "malformed"},
		{[]string{"bfs://u@node/a"}, Identity{}, "malformed"},
	} {
		c := &x509.Certificate{}
		for _, s := range tc.uris {
			u, err := url.Parse(s)
			require.NoError(t, err)
			c.URIs = append(c.URIs, u)
		}
		id, err := IdentityOf(c)
		if tc.err != "" {
			require.ErrorIs(t, err, ErrNoIdentity, "%v", tc.uris)
			require.ErrorContains(t, err, tc.err, "%v", tc.uris)
			continue
		}
		require.NoError(t, err, "%v", tc.uris)
		require.Equal(t, tc.want, id)
		require.Equal(t, tc.uris[0], id.URI().String())
	}
}

func TestListReportsBadFiles(t *testing.T) {
	p := newPKI(t)
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "junk.crt"), []byte("not PEM"), 0o644))
	infos, err := List(p.dir)
	require.NoError(t, err)
	var bad []string
	for _, in := range infos {
		if in.Err != nil {
			bad = append(bad, in.File)
		}
	}
	require.Equal(t, []string{"junk.crt"}, bad)
	_, err = List(filepath.Join(p.dir, "missing"))
	require.True(t, errors.Is(err, os.ErrNotExist))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	fi, err := os.Stat(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, fi.Mode().Perm()))
	require.NoError(t, os.Chmod(to, fi.Mode().Perm()))
}
