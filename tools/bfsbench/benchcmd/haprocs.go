package benchcmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/tools/bfs/bfscmd"
)

// The failover of the ha benchmark is measured on daemons in processes of
// their own, so that killing the leader is what a crash is: kill -9, its
// sockets closed by the kernel, nothing flushed. Each daemon is bfsbench
// (or its test binary) run again with bfsDaemonEnv set, which runs
// bfscmd.Main, the code of the bfs command itself, on the arguments: the
// process is `bfs nameserver ...` or `bfs chunkserver ...` in all but its
// name, and no separate build of bfs is needed.

// bfsDaemonEnv, set, makes this binary the bfs command.
const bfsDaemonEnv = "BFSBENCH_BFS"

// RunBFS runs the bfs command on args if this process was started as a
// daemon of the ha benchmark, and says whether it was.
func RunBFS(ctx context.Context, args []string, stdout, stderr io.Writer) (int, bool) {
	if os.Getenv(bfsDaemonEnv) == "" {
		return 0, false
	}
	return bfscmd.Main(ctx, args, stdout, stderr), true
}

const (
	// procStartTimeout bounds a daemon's start, until it says it listens.
	procStartTimeout = 30 * time.Second
	// procStopTimeout is how long a daemon asked to stop (SIGTERM) has
	// before it is killed.
	procStopTimeout = 10 * time.Second
)

// proc is one daemon process.
type proc struct {
	name string
	// args start it again after a kill, on the same data and addresses.
	args []string
	// logPath gets its stderr (its glog lines), appended across restarts.
	logPath string
	cmd     *exec.Cmd
	// exited is closed once the process has exited.
	exited chan struct{}
	// addr is the address it said it listens on.
	addr string
}

// startProc starts the daemon name (bfs args...) and waits until it says
// it listens ("<kind> listening on ADDR ...", kind being args[0]).
func startProc(ctx context.Context, name, logPath string, args ...string) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, args: args, logPath: logPath, exited: make(chan struct{})}
	listening := make(chan string, 1)
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = append(os.Environ(), bfsDaemonEnv+"=1")
	p.cmd.Stdout = &lineWatch{prefix: args[0] + " listening on ", found: listening}
	p.cmd.Stderr = log
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		p.cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	timeout := time.NewTimer(procStartTimeout)
	defer timeout.Stop()
	select {
	case p.addr = <-listening:
		return p, nil
	case <-p.exited:
		err = fmt.Errorf("%s exited at its start (%v): see %s", name, p.cmd.ProcessState, logPath)
	case <-timeout.C:
		err = fmt.Errorf("%s not listening after %v: see %s", name, procStartTimeout, logPath)
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, err
}

// kill kills the process with SIGKILL, as a crash would, and waits until
// it is gone.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// stop asks the process to stop (SIGTERM), and kills it if it has not
// within procStopTimeout.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(procStopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.kill()
	}
}

// restart starts the process again as it was started.
func (p *proc) restart(ctx context.Context) (*proc, error) {
	return startProc(ctx, p.name, p.logPath, p.args...)
}

// lineWatch is a daemon's stdout: it sends the rest of the first line
// starting with prefix, up to a space, on found, and drops the rest.
type lineWatch struct {
	prefix string
	found  chan<- string
	mu     sync.Mutex // guards buf and done
	buf    []byte
	done   bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if rest, ok := strings.CutPrefix(line, w.prefix); ok {
			addr, _, _ := strings.Cut(rest, " ")
			w.found <- addr
			w.done, w.buf = true, nil
			return len(p), nil
		}
	}
}

// makeCerts makes in dir the certificates of a cluster of daemons on
// loopback, as the sandbox makes its own: a CA, a node certificate and a
// client and an admin one.
func makeCerts(dir string) error {
	caKey := filepath.Join(dir, "ca.key")
	certsDir := filepath.Join(dir, "certs")
	if err := certs.CreateCA(certsDir, caKey, certs.Options{}); err != nil {
		return err
	}
	ca, err := certs.LoadAuthority(certsDir, caKey)
	if err != nil {
		return err
	}
	hosts := []string{"127.0.0.1", "localhost"}
	if err := ca.CreateNode(certsDir, certs.RoleNameServer, "", hosts, certs.Options{}); err != nil {
		return err
	}
	// The chunkservers' certificate, in a directory of their own beside
	// the CA's certificate: a chunkserver takes commands only from a
	// nameserver's certificate, and registers only with its own.
	csDir := chunkserverCertsDir(dir)
	caPEM, err := os.ReadFile(filepath.Join(certsDir, certs.CAFile))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(csDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(csDir, certs.CAFile), caPEM, 0o644); err != nil {
		return err
	}
	if err := ca.CreateNode(csDir, certs.RoleChunkserver, "chunkserver", hosts, certs.Options{}); err != nil {
		return err
	}
	for _, id := range []certs.Identity{{Kind: certs.KindClient, Name: certs.ClientUser}, {Kind: certs.KindAdmin, Name: certs.AdminUser}} {
		if err := ca.CreateClient(certsDir, id, certs.Options{}); err != nil {
			return err
		}
	}
	return nil
}

// chunkserverCertsDir is where makeCerts puts the chunkservers'
// certificates.
func chunkserverCertsDir(dir string) string { return filepath.Join(dir, "certs-chunkserver") }

// stopAll stops the processes, all at once.
func stopAll(ps ...*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop()
		}()
	}
	wg.Wait()
}
