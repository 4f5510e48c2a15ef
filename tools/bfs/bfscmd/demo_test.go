package bfscmd_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// demoSteps are the steps the narration must tell, in order.
var demoSteps = []*regexp.Regexp{
	regexp.MustCompile(`tablet server A \(tablet-a\) locks /demo/t1: epoch (\d+) \(\d+\.\d ms\)`),
	regexp.MustCompile(`A writes and syncs 1048576 bytes to /demo/t1/log, on 3 chunkservers \(\d+\.\d ms\)`),
	regexp.MustCompile(`the master declares A dead and force-unlocks /demo/t1 \(epoch \d+\)`),
	regexp.MustCompile(`/demo/t1 is CLEANING: sealing 1 file on 3 chunkservers`),
	regexp.MustCompile(`/demo/t1 is UNLOCKED after \d+\.\d ms: 1 file sealed, closed at 1048576 bytes`),
	regexp.MustCompile(`A's lock handle reports the loss: directory lock lost`),
	regexp.MustCompile(`tablet server B \(tablet-b\) locks /demo/t1 at epoch (\d+), newer than A's (\d+)`),
	regexp.MustCompile(`B reads /demo/t1/log: 1048576 bytes, all 1048576 bytes A synced are there`),
	regexp.MustCompile(`A tries to write again: refused \(sealed`),
	regexp.MustCompile(`A tries to create /demo/t1/late: refused \(stale epoch: .*lock of /demo/t1 at epoch \d+ was lost`),
	regexp.MustCompile(`Done: A is fenced, B took /demo/t1 over`),
}

// TestSandboxDemo runs `bfs sandbox --demo-only` twice on the same data
// (the second run clears what the first left) and checks the narration
// tells every step of the failover, in order, and exits 0.
func TestSandboxDemo(t *testing.T) {
	dir := t.TempDir()
	for run := range 2 {
		r := runSandboxDemo(t, dir)
		require.Equal(t, 0, r.code, "run %d: stderr:\n%s\nstdout:\n%s", run, r.stderr, r.stdout)
		t.Logf("run %d:\n%s", run, r.stdout)
		out := r.stdout
		for _, step := range demoSteps {
			loc := step.FindStringIndex(out)
			require.NotNil(t, loc, "run %d: the narration lacks, or tells out of order, %q:\n%s", run, step, r.stdout)
			out = out[loc[1]:]
		}
		m := demoSteps[6].FindStringSubmatch(r.stdout)
		require.Greater(t, atoi(t, m[1]), atoi(t, m[2]), "B's epoch is not newer than A's")
		require.Contains(t, r.stdout, "stopping the sandbox")
		if run == 1 {
			require.Contains(t, r.stdout, "removing /demo/t1, left by an earlier demo")
		}
	}
}

func runSandboxDemo(t *testing.T, dir string) result {
	t.Helper()
	return run(t, "sandbox", "--dir", dir, "--listen", "127.0.0.1:0", "--chunkserver-port", "0", "--http-port", "0", "--demo-only")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
