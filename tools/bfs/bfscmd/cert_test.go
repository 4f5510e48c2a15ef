package bfscmd_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/tools/bfs/bfscmd"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

func TestCertCommands(t *testing.T) {
	dir, caKey := filepath.Join(t.TempDir(), "certs"), filepath.Join(t.TempDir(), "safe", "ca.key")
	cert := func(args ...string) result {
		t.Helper()
		return run(t, append(append([]string{"cert"}, args...), "--certs-dir", dir, "--ca-key", caKey)...)
	}
	for _, args := range [][]string{
		{"create-ca"},
		{"create-node", "127.0.0.1", "ns1.example.com", "--role", "nameserver"},
		{"create-client", "tablet"},
		{"create-client", "ops", "--admin"},
	} {
		r := cert(args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
	r := run(t, "cert", "list", "--certs-dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	for _, re := range []string{
		`(?m)^ca\.crt +ca +- +- +\d{4}-`,
		`(?m)^client\.ops\.crt +admin +ops +- +\S+ +client\.ops\.key$`,
		`(?m)^client\.tablet\.crt +client +tablet +- +\S+ +client\.tablet\.key$`,
		`(?m)^node\.crt +nameserver +127\.0\.0\.1 +ns1\.example\.com,127\.0\.0\.1 +\S+ +node\.key$`,
	} {
		assert.Regexp(t, re, r.stdout)
	}
	for _, key := range []string{caKey, filepath.Join(dir, "node.key"), filepath.Join(dir, "client.ops.key")} {
		fi, err := os.Stat(key)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), key)
	}

	// What exists stays, unless --overwrite.
	r = cert("create-client", "tablet")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "exists (--overwrite replaces it)")
	r = cert("create-node", "10.0.0.7", "--name", "ns2", "--role", "chunkserver", "--overwrite", "--lifetime", "24h")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `wrote \S+node\.crt \(chunkserver/ns2, valid until \S+\)`, r.stdout)

	// Bad input.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cert", "create-ca", "--ca-key", caKey}, 2, "say where the certificates go"},
		{[]string{"cert", "create-node", "h", "--certs-dir", dir}, 2, "--ca-key is required"},
		{[]string{"cert", "create-client", "--certs-dir", dir, "--ca-key", caKey}, 2, "accepts 1 arg"},
		{[]string{"cert", "create-node", "--certs-dir", dir, "--ca-key", caKey}, 2, "requires at least 1 arg"},
		{[]string{"cert", "create-node", "host:80", "--role", "chunkserver", "--certs-dir", dir, "--ca-key", caKey, "--overwrite"}, 1, "not an IP address or a DNS name"},
		{[]string{"cert", "create-node", "h", "--certs-dir", dir, "--ca-key", caKey, "--overwrite"}, 2, "--role is required"},
		{[]string{"cert", "create-node", "h", "--role", "node", "--certs-dir", dir, "--ca-key", caKey, "--overwrite"}, 2, "no role"},
		{[]string{"cert", "create-client", "a/b", "--certs-dir", dir, "--ca-key", caKey}, 1, "letters, digits"},
		{[]string{"cert", "create-client", "x", "--certs-dir", dir, "--ca-key", caKey, "--lifetime", "-1h"}, 1, "negative lifetime"},
		{[]string{"cert", "create-client", "x", "--certs-dir", dir, "--ca-key", filepath.Join(dir, "node.key")}, 1, "no CA certificate"},
		{[]string{"cert", "list", "--certs-dir", filepath.Join(dir, "nope")}, 1, "no such file"},
	} {
		r := run(t, tc.args...)
		assert.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
	require.NoError(t, os.Chmod(caKey, 0o644))
	r = cert("create-client", "y")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "readable by group or others")
}

// A daemon starts only with certificates, or with --insecure said.
func TestDaemonNeedsCertificates(t *testing.T) {
	t.Setenv("BFS_CERTS_DIR", "")
	for _, daemon := range []string{"nameserver", "chunkserver"} {
		r := run(t, daemon, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics", "")
		assert.Equal(t, 1, r.code, daemon)
		assert.Contains(t, r.stderr, "no certificates: give --certs-dir or $BFS_CERTS_DIR", daemon)
		r = run(t, daemon, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics", "", "--insecure", "--certs-dir", t.TempDir())
		assert.Equal(t, 1, r.code, daemon)
		assert.Contains(t, r.stderr, "--insecure and --certs-dir exclude each other", daemon)
		r = run(t, daemon, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics", "", "--certs-dir", t.TempDir())
		assert.Equal(t, 1, r.code, daemon)
		assert.Contains(t, r.stderr, "ca.crt: no such file", daemon)
	}
	r := run(t, "--nameserver", unreachable, "ls", "/")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no certificates")
}

// TestSandboxSecureByDefault runs `bfs sandbox` with its default data
// folder in a fresh working directory: it makes its certificates, and
// bfs and lockctl run from there work against it with no flag but the
// address, file and admin commands alike; a plaintext client is refused.
func TestSandboxSecureByDefault(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("BFS_CERTS_DIR", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		defer pw.Close()
		exited <- bfscmd.Main(ctx, []string{"sandbox", "--listen", "127.0.0.1:0", "--chunkserver-port", "0"}, pw, &stderr)
	}()
	var out []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.Contains(sc.Text(), "Ctrl-C stops the sandbox") {
		out = append(out, sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	printed := strings.Join(out, "\n")
	require.Contains(t, printed, "mutual TLS, certificates in bfs-data/certs (CA key bfs-data/ca.key)", "stderr:\n%s", stderr.String())
	m := regexp.MustCompile(`nameserver +(127\.0\.0\.1:\d+)`).FindStringSubmatch(printed)
	require.NotNil(t, m, printed)
	ns := m[1]
	for _, f := range []string{"certs/ca.crt", "certs/node.crt", "certs/node.key", "certs/client.bfs.crt", "certs/client.admin.key", "ca.key"} {
		require.FileExists(t, filepath.Join("bfs-data", f))
	}

	require.NoError(t, os.WriteFile("local", []byte("hello"), 0o644))
	for _, args := range [][]string{{"put", "local", "/readme"}, {"cat", "/readme"}, {"admin", "report"}, {"fsck", "/"}} {
		r := run(t, append([]string{"--nameserver", ns}, args...)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
	var lout, lerr bytes.Buffer
	require.Equal(t, 0, lockcmd.Main(ctx, []string{"--nameserver", ns, "list"}, &lout, &lerr), lerr.String())
	r := run(t, "--nameserver", ns, "--insecure", "ls", "/")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "unavailable")

	cancel()
	select {
	case code := <-exited:
		assert.Equal(t, 0, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the sandbox did not stop")
	}
}
