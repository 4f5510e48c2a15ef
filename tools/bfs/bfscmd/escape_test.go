package bfscmd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/sdk"
)

// noControl fails the test if s holds a control character other than the
// newlines and the tabs (stat's tabwriter pads with spaces) bfs prints
// itself.
func noControl(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && (r < 0x20 || r == 0x7f) {
			t.Errorf("%s prints the control character %U raw: %q", what, r, s)
			return
		}
	}
}

// TestNamesAreEscaped: names are chosen by whoever creates them, and the
// namespace takes any character but NUL, so a name can carry terminal
// escapes. Every line bfs prints shows them escaped, never raw: a
// listing must not be rewritten by the names it lists.
func TestNamesAreEscaped(t *testing.T) {
	ns := testcluster.Start(t)
	const dir = "/tablet9\x1b[2K\rtablet8"
	const escaped = `/tablet9\x1b[2K\rtablet8`
	c, err := sdk.Dial(context.Background(), ns.NameServerAddr, sdk.WithHolder("tablet server"), ns.AsClient())
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, c.MkdirAll(ctx, dir, 0))
	require.NoError(t, c.Touch(ctx, dir+"/tab\there"))
	_, err = c.LockDir(ctx, dir)
	require.NoError(t, err)

	for _, args := range [][]string{{"ls", "/"}, {"ls", "-l", "/"}, {"ls", "-R", "/"}, {"stat", dir}, {"du", dir}} {
		r := bfs(t, ns, args...)
		require.Equal(t, 0, r.code, "%q: %s", args, r.stderr)
		noControl(t, strings.Join(args, " "), r.stdout)
		assert.Contains(t, r.stdout, escaped, "%q", args)
	}
	r := bfs(t, ns, "ls", "-R", "/")
	assert.Contains(t, r.stdout, escaped+`/tab\there`)
	r = bfs(t, ns, "ls", "-l", "/")
	assert.Contains(t, r.stdout, "(locked by tablet server, epoch")

	r = bfs(t, ns, "rm", dir+"/nope\x07")
	assert.Equal(t, 1, r.code)
	noControl(t, "an error", r.stderr)
	assert.Equal(t, "bfs: remove "+escaped+`/nope\a: `+escaped+" locked by tablet server (epoch 1)\n", r.stderr)
	r = bfs(t, ns, "location", dir+"/tab\there")
	require.Equal(t, 0, r.code, r.stderr)
	noControl(t, "location", r.stdout)
	assert.Contains(t, r.stdout, escaped+`/tab\there: 0 bytes`)
}
