package lockcmd_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/internal/testcluster"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

// TestUnlockMissingDirectory: unlocking a path that does not exist is not
// "unlocked": it exits 5 and says the path is not there, forced or not.
func TestUnlockMissingDirectory(t *testing.T) {
	ns := testcluster.Start(t).NameServerAddr
	require.NoError(t, dial(t, ns).Mkdir(context.Background(), "/present", 0))
	for _, args := range [][]string{
		{"unlock", "--force", "/nonexistent"},
		{"unlock", "/nonexistent"},
		{"unlock", "--force", "--wait", "/nonexistent"},
		{"unlock", "--force", "/present/nonexistent"},
	} {
		r := lockctl(t, ns, args...)
		assert.Equal(t, lockcmd.ExitNotFound, r.code, "%q: stdout %q", args, r.stdout)
		assert.Empty(t, r.stdout, "%q", args)
		assert.Regexp(t, `^lockctl: unlock /\S*nonexistent: .*no such file or directory.*\n$`, r.stderr, "%q", args)
	}
	r := lockctl(t, ns, "unlock", "--force", "/present")
	assert.Equal(t, lockcmd.ExitOK, r.code, r.stderr)
	assert.Equal(t, "unlocked /present\n", r.stdout, "an existing unlocked directory is reported as such")
}
