package bfscmd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/golang/glog"
	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/certs"
)

func (e *env) sandboxCommand() *cobra.Command {
	var (
		dir          string
		listen       string
		nameservers  int
		chunkservers int
		basePort     int
		httpPort     int
		demo         bool
		demoOnly     bool
	)
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run a nameserver and chunkservers on loopback until Ctrl-C",
		Long: `sandbox starts a whole cluster in this process: a nameserver and
(by default) three chunkservers on 127.0.0.1, with all data under one
folder. It prints the addresses and a few commands to try, and stops
cleanly on Ctrl-C. Running it again on the same folder keeps the data.

Every daemon serves HTTP on loopback, from --http-port on: the
nameservers their status page (https://127.0.0.1:8840/ by default) and
Prometheus metrics (/metrics), each chunkserver its metrics on the
ports after them. BUILD.md has a Prometheus scrape configuration for them
and deploy/grafana a dashboard.

The sandbox is secure: the first run makes a CA and certificates in
<dir>/certs (the CA key in <dir>/ca.key), and every daemon serves mutual
TLS with them, the HTTP ports and the nameservers' Raft links included.
bfs and lockctl run from the same working directory find them with no
flag (./bfs-data/certs); otherwise give them --certs-dir. --insecure
runs the daemons in plaintext instead (tools then need --insecure too).

With --demo it first runs a narrated failover against itself: tablet
server A locks /demo/t1 and writes, the master force-unlocks it, the
directory is cleaned (A's file sealed), B takes the lock over and reads
A's bytes, and A is refused. --demo-only exits after the demo.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, _ []string) error {
			if chunkservers < 1 || chunkservers > 64 {
				return usagef("--chunkservers must be in [1, 64], got %d", chunkservers)
			}
			if nameservers != 1 && nameservers != 3 && nameservers != 5 {
				return usagef("--nameservers must be 1, 3 or 5, got %d", nameservers)
			}
			if basePort < 0 || basePort+chunkservers > 65535 {
				return usagef("--chunkserver-port %d out of range", basePort)
			}
			if httpPort < 0 || httpPort+nameservers+chunkservers > 65535 {
				return usagef("--http-port %d out of range", httpPort)
			}
			if e.certsDir != "" {
				return usagef("the sandbox keeps its certificates in <dir>/certs: --certs-dir is for the other commands")
			}
			defaultLogToStderr(cmd.Flags())
			defer glog.Flush()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg := sandbox.Config{Dir: dir, NameServers: nameservers, Chunkservers: chunkservers, HTTP: true, Insecure: e.insecure}
			var err error
			if cfg.NameServerAddrs, cfg.RaftAddrs, err = sandboxNameServerAddrs(listen, nameservers); err != nil {
				return err
			}
			if basePort > 0 {
				for i := range chunkservers {
					cfg.ChunkserverAddrs = append(cfg.ChunkserverAddrs, fmt.Sprintf("127.0.0.1:%d", basePort+i))
				}
			}
			if httpPort > 0 {
				for i := range nameservers + chunkservers {
					cfg.HTTPAddrs = append(cfg.HTTPAddrs, fmt.Sprintf("127.0.0.1:%d", httpPort+i))
				}
			}
			sb, err := sandbox.Start(cfg)
			if err != nil {
				return err
			}
			e.printSandbox(sb, dir)
			if demo || demoOnly {
				err := e.runDemo(ctx, sb, chunkservers)
				if err != nil && ctx.Err() == nil {
					return errors.Join(fmt.Errorf("demo: %w", err), sb.Close())
				}
			}
			if demoOnly || ctx.Err() != nil { // done, or Ctrl-C during the demo
				fmt.Fprintln(e.stdout, "\nstopping the sandbox...")
				return sb.Close()
			}
			e.printTips(sb, demo)
			<-ctx.Done()
			fmt.Fprintln(e.stdout, "\nstopping the sandbox...")
			return sb.Close()
		}),
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "bfs-data", "folder holding every daemon's data")
	f.StringVar(&listen, "listen", DefaultNameServer, "the first nameserver's listen address (the others listen 100 ports apart; each one's peers dial the port below its own)")
	f.IntVar(&nameservers, "nameservers", 1, "nameservers in the group: 1, 3 or 5")
	f.IntVar(&chunkservers, "chunkservers", 3, "number of chunkservers")
	f.IntVar(&basePort, "chunkserver-port", 8830, "first chunkserver port on 127.0.0.1 (0: any free ports)")
	f.IntVar(&httpPort, "http-port", 8840, "the nameservers' HTTP ports (status page, metrics) on 127.0.0.1, then the chunkservers' metrics on the ports after them (0: any free ports)")
	f.BoolVar(&demo, "demo", false, "run a narrated failover demo once the sandbox is up")
	f.BoolVar(&demoOnly, "demo-only", false, "run the demo, then stop the sandbox and exit")
	addGlogFlags(f)
	return cmd
}

// sandboxNameServerAddrs gives the sandbox's nameservers their
// addresses. A lone nameserver listens on --listen and takes any free
// port for Raft. Members of a group get fixed addresses, so that running
// the sandbox again on the same folder finds the group it stored:
// nameserver i listens 100*i ports above --listen, and its peers dial the
// port below its own; with port 0 every port is a free one.
func sandboxNameServerAddrs(listen string, n int) (clients, rafts []string, err error) {
	host, portStr, err := net.SplitHostPort(listen)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 0 || port+100*(n-1) > 65535 {
		return nil, nil, usagef("--listen %q: want HOST:PORT with a port in [0, %d]", listen, 65535-100*(n-1))
	}
	if n == 1 || port == 0 {
		clients = []string{listen}
		for range n - 1 {
			clients = append(clients, net.JoinHostPort(host, "0"))
		}
		return clients, nil, nil
	}
	for i := range n {
		p := port + 100*i
		clients = append(clients, net.JoinHostPort(host, strconv.Itoa(p)))
		rafts = append(rafts, net.JoinHostPort(host, strconv.Itoa(p-1)))
	}
	return clients, rafts, nil
}

func (e *env) printSandbox(sb *sandbox.Sandbox, dir string) {
	fmt.Fprintf(e.stdout, "BFS sandbox running, data in %s\n", dir)
	if c := sb.CertsDir(); c != "" {
		fmt.Fprintf(e.stdout, "  mutual TLS, certificates in %s (CA key %s)\n", c, sandbox.CAKey(dir))
	} else {
		fmt.Fprintln(e.stdout, "  INSECURE: plaintext, no authentication (--insecure)")
	}
	nsWeb := sb.NameServerHTTPAddrs()
	for i, a := range sb.NameServerAddrs() {
		fmt.Fprintf(e.stdout, "  nameserver   %-16s  status page %s  metrics %s  (%s)\n",
			a, sb.URL(nsWeb[i], "/"), sb.URL(nsWeb[i], "/metrics"), sandbox.NameServerName(i))
	}
	web := sb.ChunkserverHTTPAddrs()
	for i, a := range sb.ChunkserverAddrs() {
		fmt.Fprintf(e.stdout, "  chunkserver  %-16s  metrics %s  (%d)\n", a, sb.URL(web[i], "/metrics"), i)
	}
}

// printTips prints commands to try against the sandbox; after the demo,
// some that look at what it left.
func (e *env) printTips(sb *sandbox.Sandbox, demo bool) {
	ns := ""
	if sb.NameServerAddr != DefaultNameServer {
		ns = " --nameserver " + sb.NameServerAddr
	}
	switch c := sb.CertsDir(); {
	case c == "":
		ns += " --insecure"
	case filepath.Clean(c) != filepath.Clean(certs.SandboxDir):
		ns += " --certs-dir " + c
	}
	fmt.Fprintf(e.stdout, `
Try, from another terminal:
  go run ./tools/bfs%[1]s mkdir -p /demo
  go run ./tools/bfs%[1]s put README.md /demo/readme
  go run ./tools/bfs%[1]s ls -l /demo
  go run ./tools/bfs%[1]s cat /demo/readme
  go run ./tools/bfs%[1]s location /demo/readme
`, ns)
	if demo {
		fmt.Fprintf(e.stdout, `  go run ./tools/bfs%[1]s ls -l %[2]s
  go run ./tools/bfs%[1]s location %[3]s
`, ns, demoDir, demoFile)
	}
	fmt.Fprintln(e.stdout, "\nCtrl-C stops the sandbox.")
}
