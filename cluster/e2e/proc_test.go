package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/bfs-go/bfs/internal/certs"
)

// The binaries built once for the package's tests: bfs (the daemons) and
// tabletserver (the tablet server of the failover tests).
var bfsBin, tabletBin string

// certsDir holds the certificates every process of the tests uses: a CA,
// a node certificate for loopback, a client and an admin. TestMain makes
// them and names them in $BFS_CERTS_DIR, which every process started
// inherits. clientCreds are the client's, for the tests' own RPCs.
var (
	certsDir    string
	clientCreds *certs.Creds
	// csCertsDir holds the chunkservers' node certificate (role
	// chunkserver) and the CA; they start with --certs-dir csCertsDir.
	csCertsDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bfs-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bfsBin = filepath.Join(dir, "bfs")
	tabletBin = filepath.Join(dir, "tabletserver")
	args := []string{"build", "-o", dir + string(filepath.Separator),
		"github.com/bfs-go/bfs/tools/bfs", "github.com/bfs-go/bfs/cluster/e2e/tabletserver"}
	if raceBuild {
		args = append(args[:1], append([]string{"-race"}, args[1:]...)...)
	}
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the binaries:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	if err := makeCerts(filepath.Join(dir, "certs")); err != nil {
		fmt.Fprintln(os.Stderr, "making the certificates:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// glog starts its flush daemon at package init; it is not ours.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// makeCerts makes the tests' certificates in dir and points
// $BFS_CERTS_DIR at them.
func makeCerts(dir string) error {
	caKey := filepath.Join(filepath.Dir(dir), "ca.key")
	if err := certs.CreateCA(dir, caKey, certs.Options{}); err != nil {
		return err
	}
	ca, err := certs.LoadAuthority(dir, caKey)
	if err != nil {
		return err
	}
	if err := ca.CreateNode(dir, certs.RoleNameServer, "", []string{"127.0.0.1", "localhost"}, certs.Options{}); err != nil {
		return err
	}
	// The chunkservers' certificate, in a directory of its own: a
	// chunkserver takes commands only from a nameserver's certificate.
	csCertsDir = filepath.Join(dir, "chunkserver")
	caPEM, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(csCertsDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(csCertsDir, certs.CAFile), caPEM, 0o644); err != nil {
		return err
	}
	if err := ca.CreateNode(csCertsDir, certs.RoleChunkserver, "chunkserver", []string{"127.0.0.1", "localhost"}, certs.Options{}); err != nil {
		return err
	}
	for _, id := range []certs.Identity{{Kind: certs.KindClient, Name: certs.ClientUser}, {Kind: certs.KindAdmin, Name: certs.AdminUser}} {
		if err := ca.CreateClient(dir, id, certs.Options{}); err != nil {
			return err
		}
	}
	if clientCreds, err = certs.LoadClient(dir, certs.ClientUser); err != nil {
		return err
	}
	certsDir = dir
	return os.Setenv(certs.EnvDir, dir)
}

// process is a program the test started. Its stderr goes to the test log
// (and a data race a -race binary reports fails the test); its stdout
// lines go to the onLine function it was started with.
type process struct {
	name string
	cmd  *exec.Cmd
	// addr is the address a daemon listens on ("" for other programs).
	addr string
	// done is closed once the process has exited and its output is read.
	done chan struct{}
	// stdin is the process's standard input.
	stdin io.WriteCloser
	// stderr holds the lines the process wrote on stderr so far, stdout
	// those on stdout.
	stderr, stdout struct {
		sync.Mutex
		lines []string
	}
}

// outCount returns how many of the process's stdout lines so far contain
// part.
func (p *process) outCount(part string) int {
	p.stdout.Lock()
	defer p.stdout.Unlock()
	n := 0
	for _, line := range p.stdout.lines {
		if strings.Contains(line, part) {
			n++
		}
	}
	return n
}

// logCount returns how many of the process's stderr lines so far contain
// every one of parts.
func (p *process) logCount(parts ...string) int {
	p.stderr.Lock()
	defer p.stderr.Unlock()
	n := 0
	for _, line := range p.stderr.lines {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(line, part)
		}
		if all {
			n++
		}
	}
	return n
}

// startProcess runs bin with args and kills it at the end of the test.
// onLine gets every line the process prints on stdout, in order, from one
// goroutine; it may be nil.
func startProcess(t *testing.T, name, bin string, args []string, onLine func(string)) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %v: %v", name, args, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), stdin: stdin}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		scanLines(stdout, func(line string) {
			p.stdout.Lock()
			p.stdout.lines = append(p.stdout.lines, line)
			p.stdout.Unlock()
			if onLine != nil {
				onLine(line)
			}
		})
	}()
	go func() {
		defer readers.Done()
		scanLines(stderr, func(line string) {
			p.stderr.Lock()
			p.stderr.lines = append(p.stderr.lines, line)
			p.stderr.Unlock()
			t.Logf("%s: %s", name, line)
			if strings.Contains(line, "WARNING: DATA RACE") {
				t.Errorf("%s reports a data race (see its log)", name)
			}
		})
	}()
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// scanLines calls fn for every line r yields, however long, until EOF.
func scanLines(r io.Reader, fn func(string)) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			fn(strings.TrimSuffix(line, "\n"))
		}
		if err != nil {
			return
		}
	}
}

var listeningRE = regexp.MustCompile(`listening on (\S+)`)

// startDaemon runs `bfs args...`, waits until it prints the address it
// listens on and answers health checks, and kills it at the end of the
// test.
func startDaemon(t *testing.T, args ...string) *process {
	t.Helper()
	addrc := make(chan string, 1)
	p := startProcess(t, args[0], bfsBin, args, func(line string) {
		if m := listeningRE.FindStringSubmatch(line); m != nil {
			select {
			case addrc <- m[1]:
			default:
			}
		}
	})
	select {
	case p.addr = <-addrc:
	case <-p.done:
		t.Fatalf("%v exited before listening: %v", args, p.cmd.ProcessState)
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not print its address within 30s", args)
	}
	waitHealthy(t, p.addr)
	return p
}

// kill sends SIGKILL (which also ends a stopped process) and waits until
// the process is gone.
func (p *process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.stdin.Close()
}

// stop freezes the process with SIGSTOP and returns once every one of its
// threads has stopped: from then on it does nothing at all.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", p.name, err)
	}
	waitFor(t, 10*time.Second, p.name+" to stop", func() bool { return p.stopped(t) })
}

// cont resumes a process frozen by stop.
func (p *process) cont(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %s: %v", p.name, err)
	}
}

// stopped reports whether every thread of the process is in the stopped
// state, from /proc/PID/task/*/stat.
func (p *process) stopped(t *testing.T) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", p.cmd.Process.Pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of %s: %v", p.name, err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			return false // a thread ended; look again
		}
		// "tid (comm) S ...": the state follows the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
			return false
		}
	}
	return true
}

// wait waits up to d for the process to exit by itself.
func (p *process) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v", p.name, d)
	}
}

func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.TransportCredentials(clientCreds)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := healthpb.NewHealthClient(conn)
	for {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never became healthy: %v", addr, err)
		}
	}
}

// pollInterval is how often waitFor looks at its condition.
const pollInterval = 20 * time.Millisecond

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(pollInterval)
	}
}
