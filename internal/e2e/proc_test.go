package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// bfsBin is the bfs binary built once for the package's tests.
var bfsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bfs-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bfsBin = filepath.Join(dir, "bfs")
	build := exec.Command("go", "build", "-race", "-o", bfsBin, "github.com/bfs-go/bfs/tools/bfs")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building bfs:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a daemon started from the built binary.
type process struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

var listeningRE = regexp.MustCompile(`listening on (\S+)`)

// startDaemon runs `bfs args...`, waits until it prints the address it
// listens on and answers health checks, and kills it at the end of the test.
func startDaemon(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bfsBin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testLogWriter{t: t, prefix: args[0]}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	select {
	case p.addr = <-addrc:
	case <-p.done:
		t.Fatalf("%v exited before listening", args)
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not print its address within 30s", args)
	}
	waitHealthy(t, p.addr)
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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

// testLogWriter forwards a daemon's stderr to the test log.
type testLogWriter struct {
	t      *testing.T
	prefix string
}

func (w *testLogWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s: %s", w.prefix, b)
	return len(b), nil
}
