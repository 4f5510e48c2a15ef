package lockcmd_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/sdk"
	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

// unreachable is an address nothing listens on.
const unreachable = "127.0.0.1:1"

// waitFor bounds every wait on an event in these tests.
const waitFor = 20 * time.Second

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := lockcmd.Main(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// lockctl runs a command against the cluster c, with its certificates.
func lockctl(t *testing.T, c *testcluster.Cluster, args ...string) result {
	t.Helper()
	return run(t, append(at(c), args...)...)
}

// at are the flags naming the cluster c and its certificates.
func at(c *testcluster.Cluster) []string {
	return []string{"--nameserver", c.NameServerAddr, "--certs-dir", c.CertsDir()}
}

// plain runs a command against addr in plaintext.
func plain(t *testing.T, addr string, args ...string) result {
	t.Helper()
	return run(t, append([]string{"--nameserver", addr, "--insecure"}, args...)...)
}

// background is a command running in its own goroutine, as a process
// would, with its output readable line by line while it runs.
type background struct {
	cancel context.CancelFunc
	stdout *lines
	stderr *lines
	done   chan int
	code   int
	ended  bool
}

// start runs lockctl against the cluster c until the command returns or stop
// (or the test's end) cancels its context, which is what SIGINT does.
func start(t *testing.T, c *testcluster.Cluster, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel, stdout: newLines(), stderr: newLines(), done: make(chan int, 1)}
	go func() {
		code := lockcmd.Main(ctx, append(at(c), args...), b.stdout.w, b.stderr.w)
		b.stdout.close()
		b.stderr.close()
		b.done <- code
	}()
	t.Cleanup(func() { b.stop(t) })
	return b
}

// wait returns the exit code once the command has returned by itself.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	if b.ended {
		return b.code
	}
	select {
	case b.code = <-b.done:
		b.ended = true
		b.stdout.drained()
		b.stderr.drained()
		return b.code
	case <-time.After(waitFor):
		t.Fatalf("command still running after %v; stderr so far:\n%s", waitFor, b.stderr.text())
		return -1
	}
}

// stop interrupts the command and returns its exit code.
func (b *background) stop(t *testing.T) int {
	t.Helper()
	b.cancel()
	return b.wait(t)
}

// lines collects a stream of output lines, readable while it grows.
type lines struct {
	w    *io.PipeWriter
	ch   chan string
	done chan struct{}
	mu   sync.Mutex
	all  []string
}

func newLines() *lines {
	r, w := io.Pipe()
	l := &lines{w: w, ch: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer close(l.ch)
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.mu.Lock()
			l.all = append(l.all, s.Text())
			l.mu.Unlock()
			l.ch <- s.Text()
		}
	}()
	return l
}

func (l *lines) close() { _ = l.w.Close() }

// drained waits for the reader goroutine after close.
func (l *lines) drained() { <-l.done }

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// next returns the next line that contains want, failing the test if none
// comes within waitFor or the stream ends first.
func (l *lines) next(t *testing.T, want string) string {
	t.Helper()
	return l.nextWithin(t, want, waitFor, true)
}

// document reads one indented JSON document (up to a line "}" or "]").
func (l *lines) document(t *testing.T) string {
	t.Helper()
	var doc []string
	for {
		s := l.next(t, "")
		doc = append(doc, s)
		if s == "}" || s == "]" {
			return strings.Join(doc, "\n")
		}
	}
}

// nextWithin is next with a deadline; with must false it returns "" when
// the deadline passes.
func (l *lines) nextWithin(t *testing.T, want string, d time.Duration, must bool) string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case s, ok := <-l.ch:
			if !ok {
				t.Fatalf("output ended without a line containing %q; got:\n%s", want, l.text())
			}
			if strings.Contains(s, want) {
				return s
			}
		case <-deadline.C:
			if must {
				t.Fatalf("no line containing %q after %v; got:\n%s", want, d, l.text())
			}
			return ""
		}
	}
}

// dial returns a client of the cluster cl, presenting its client
// certificate.
func dial(t *testing.T, cl *testcluster.Cluster, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	c, err := sdk.Dial(context.Background(), cl.NameServerAddr, append([]sdk.Option{cl.AsClient()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
