package benchcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/bfs-go/bfs/nameserver"
)

// The scale benchmark measures the nameserver's memory, so it runs the
// nameserver in a process of its own: bfsbench itself (or its test
// binary), started with scaleServerEnv naming the data directory, which
// Main checks before anything else.
const (
	scaleServerEnv = "BFSBENCH_SCALE_NAMESERVER"
	// scaleHeapEnv, if set, is where that nameserver writes a heap
	// profile (after a GC) before it stops.
	scaleHeapEnv = "BFSBENCH_SCALE_HEAP_PROFILE"
	// scaleReady starts the line the nameserver prints once it listens,
	// followed by its address.
	scaleReady = "nameserver listening on "
	// scaleStartTimeout bounds the nameserver's start; scaleStopTimeout
	// its stop, after which it is killed.
	scaleStartTimeout = 30 * time.Second
	scaleStopTimeout  = 30 * time.Second
)

// serveScaleNameServer is the nameserver process: it serves on a free
// loopback port, prints scaleReady and the address on stdout once it
// leads, and stops when its stdin closes (the parent closed it, or died).
func serveScaleNameServer(dir string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg := nameserver.DefaultConfig()
	cfg.DataDir, cfg.ListenAddr, cfg.MetricsAddr, cfg.Insecure = dir, "127.0.0.1:0", "", true
	srv, err := nameserver.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "scale nameserver: %v\n", err)
		return 1
	}
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		srv.Close()
		fmt.Fprintf(stderr, "scale nameserver: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	// Ready once it leads its group of one (its term started, its first
	// commands applied): a client's first call is not answered NOT_LEADER.
	for deadline := time.Now().Add(scaleStartTimeout); !srv.Leading() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Fprintf(stdout, "%s%s\n", scaleReady, lis.Addr())
	err = <-served
	if path := os.Getenv(scaleHeapEnv); path != "" {
		err = errors.Join(err, writeHeapProfile(path)) // the state is still in memory: Close comes after
	}
	if err = errors.Join(err, srv.Close()); err != nil {
		fmt.Fprintf(stderr, "scale nameserver: %v\n", err)
		return 1
	}
	return 0
}

func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scaleServer is a nameserver process started by startScaleServer.
type scaleServer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	dir   string
	// exited is closed when the process has been waited for.
	exited  chan struct{}
	waitErr error
}

// startScaleServer starts a nameserver process on a fresh data directory
// and waits until it listens. With heapProfile it writes its heap
// profile there before stopping.
func startScaleServer(ctx context.Context, stderr io.Writer, heapProfile string) (*scaleServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bfsbench-scale-")
	if err != nil {
		return nil, err
	}
	s := &scaleServer{cmd: exec.Command(exe), dir: dir, exited: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), scaleServerEnv+"="+filepath.Join(dir, "nameserver"))
	if heapProfile != "" {
		s.cmd.Env = append(s.cmd.Env, scaleHeapEnv+"="+heapProfile)
	}
	s.cmd.Stderr = stderr
	out, err := s.cmd.StdoutPipe()
	if err == nil {
		s.stdin, err = s.cmd.StdinPipe()
	}
	if err == nil {
		err = s.cmd.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if s.addr, err = s.awaitReady(ctx, out); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// awaitReady reads the process's ready line.
func (s *scaleServer) awaitReady(ctx context.Context, out io.Reader) (string, error) {
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	timeout := time.NewTimer(scaleStartTimeout)
	defer timeout.Stop()
	select {
	case l, ok := <-line:
		if addr, found := strings.CutPrefix(l, scaleReady); ok && found {
			return addr, nil
		}
		return "", fmt.Errorf("the scale nameserver did not start (it printed %q)", l)
	case <-timeout.C:
		return "", fmt.Errorf("the scale nameserver did not start within %v", scaleStartTimeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// rss is the process's resident memory in bytes (VmRSS, Linux only).
func (s *scaleServer) rss() (int64, error) {
	if s == nil {
		return 0, errors.New("bfsbench did not start the nameserver")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// stop closes the process's stdin, which stops it, waits (killing it
// after scaleStopTimeout) and removes its data.
func (s *scaleServer) stop() error {
	s.stdin.Close()
	timeout := time.NewTimer(scaleStopTimeout)
	defer timeout.Stop()
	select {
	case <-s.exited:
	case <-timeout.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return errors.Join(s.waitErr, os.RemoveAll(s.dir))
}
