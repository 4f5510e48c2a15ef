package replica

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// appenderEnv names the store directory in which a child process of
// TestKill9 appends (see TestMain).
const appenderEnv = "BFS_REPLICA_LOG_APPENDER"

// appenderTerm is the term of the entry the appender stores at index.
func appenderTerm(index uint64) uint64 { return index/500 + 1 }

// runAppender is the child of TestKill9: it appends testLog entries in
// batches of 1 to 32 after the last stored one, printing "ack N" once the
// batch ending at N is stored, and every 40 batches trims the head to the
// last 1000 entries, printing "trim M" before DeleteRange(first, M) and
// "trimmed M" after it. It runs until it is killed.
func runAppender(dir string) int {
	s, err := OpenLogStore(LogStoreOptions{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for batch := 1; ; batch++ {
		first, last, err := s.Bounds()
		if err != nil {
			return fail(err)
		}
		n := 1 + rand.Uint64N(32)
		var logs []*raft.Log
		for i := last + 1; i <= last+n; i++ {
			logs = append(logs, testLog(i, appenderTerm(i)))
		}
		if err := s.StoreLogs(logs); err != nil {
			return fail(err)
		}
		if _, err := fmt.Printf("ack %d\n", last+n); err != nil {
			return fail(err) // the parent is gone
		}
		if batch%40 != 0 || last+n-first < 2000 {
			continue
		}
		trim := last + n - 1000
		fmt.Printf("trim %d\n", trim)
		if err := s.DeleteRange(first, trim); err != nil {
			return fail(err)
		}
		fmt.Printf("trimmed %d\n", trim)
	}
}

// appenderLog is what the parent learned from its children's output.
type appenderLog struct {
	acked     uint64 // the highest index acknowledged
	trimming  uint64 // the highest head trim begun
	trimmed   uint64 // the highest head trim finished
	acks      int
	trimsDone int
}

func (a *appenderLog) line(t *testing.T, line string) {
	var n uint64
	switch {
	case scan(line, "ack %d", &n):
		require.GreaterOrEqual(t, n, a.acked, "acknowledged indexes only grow")
		a.acked, a.acks = n, a.acks+1
	case scan(line, "trim %d", &n):
		a.trimming = max(a.trimming, n)
	case scan(line, "trimmed %d", &n):
		a.trimmed, a.trimsDone = max(a.trimmed, n), a.trimsDone+1
	default:
		t.Fatalf("appender printed %q", line)
	}
}

func scan(line, format string, n *uint64) bool {
	_, err := fmt.Sscanf(line, format, n)
	return err == nil && fmt.Sprintf(format, *n) == line
}

// TestKill9 kills a process appending to the store with SIGKILL at
// random moments, reopens the store after each kill and checks that every
// acknowledged entry is there with its exact bytes, that LastIndex is at
// least the last acknowledged index, that a finished head trim stayed
// done, and that whatever else is stored between the bounds is intact.
func TestKill9(t *testing.T) {
	dir := t.TempDir()
	var a appenderLog
	const trials = 20
	for trial := range trials {
		// Kill after a random number of printed lines, 0 meaning as soon
		// as the process has started (during its open).
		killAfter := rand.IntN(250)
		if trial == 0 {
			killAfter = 0
		}
		runAndKill(t, dir, &a, killAfter)
		checkAfterKill(t, dir, &a)
	}
	require.Greater(t, a.acks, 0)
	t.Logf("%d kills: %d batches acknowledged up to index %d, %d head trims finished; 0 acknowledged entries lost",
		trials, a.acks, a.acked, a.trimsDone)
}

// runAndKill starts an appender on dir, kills it after killAfter acks and
// reads everything it printed before dying.
func runAndKill(t *testing.T, dir string, a *appenderLog, killAfter int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), appenderEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	kill := func() {
		if !killed {
			killed = true
			require.NoError(t, cmd.Process.Kill())
		}
	}
	defer kill()
	if killAfter == 0 {
		kill()
	}
	seen := 0
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		// Every line the child printed before it died counts, also those
		// read after the kill.
		a.line(t, lines.Text())
		if seen++; seen >= killAfter {
			kill()
		}
	}
	require.NoError(t, lines.Err())
	err = cmd.Wait()
	// Pebble's log lines go to stderr too; the appender's own errors end
	// it before the kill.
	require.Truef(t, killed, "the appender exited by itself: %v: %s", err, stderr.String())
	require.Error(t, err)
}

func checkAfterKill(t *testing.T, dir string, a *appenderLog) {
	s, err := OpenLogStore(testOptions(t, dir))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	first, last, err := s.Bounds()
	require.NoError(t, err)
	require.GreaterOrEqual(t, last, a.acked, "LastIndex below an acknowledged index")
	if a.trimmed > 0 {
		require.Greater(t, first, a.trimmed, "a finished trim came back")
		require.True(t, s.GetLog(a.trimmed, new(raft.Log)) == raft.ErrLogNotFound)
	}
	if a.acked > 0 {
		require.LessOrEqual(t, first, max(a.trimming+1, 1), "acknowledged entries past the last trim are missing")
	}
	for i := first; i != 0 && i <= last; i++ {
		var got raft.Log
		require.NoError(t, s.GetLog(i, &got), "entry %d of %d..%d", i, first, last)
		require.Empty(t, sameLog(testLog(i, appenderTerm(i)), &got))
	}
}
