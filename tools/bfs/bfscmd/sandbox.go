package bfscmd

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/golang/glog"
	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/sandbox"
)

func (e *env) sandboxCommand() *cobra.Command {
	var (
		dir          string
		listen       string
		chunkservers int
		basePort     int
	)
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run a nameserver and chunkservers on loopback until Ctrl-C",
		Long: `sandbox starts a whole cluster in this process: a nameserver and
(by default) three chunkservers on 127.0.0.1, with all data under one
folder. It prints the addresses and a few commands to try, and stops
cleanly on Ctrl-C. Running it again on the same folder keeps the data.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, _ []string) error {
			if chunkservers < 1 || chunkservers > 64 {
				return usagef("--chunkservers must be in [1, 64], got %d", chunkservers)
			}
			if basePort < 0 || basePort+chunkservers > 65535 {
				return usagef("--chunkserver-port %d out of range", basePort)
			}
			defaultLogToStderr(cmd.Flags())
			defer glog.Flush()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg := sandbox.Config{Dir: dir, NameServerAddr: listen, Chunkservers: chunkservers}
			if basePort > 0 {
				for i := range chunkservers {
					cfg.ChunkserverAddrs = append(cfg.ChunkserverAddrs, fmt.Sprintf("127.0.0.1:%d", basePort+i))
				}
			}
			sb, err := sandbox.Start(cfg)
			if err != nil {
				return err
			}
			e.printSandbox(sb, dir)
			<-ctx.Done()
			fmt.Fprintln(e.stdout, "\nstopping the sandbox...")
			return sb.Close()
		}),
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "bfs-data", "folder holding every daemon's data")
	f.StringVar(&listen, "listen", DefaultNameServer, "nameserver listen address")
	f.IntVar(&chunkservers, "chunkservers", 3, "number of chunkservers")
	f.IntVar(&basePort, "chunkserver-port", 8830, "first chunkserver port on 127.0.0.1 (0: any free ports)")
	addGlogFlags(f)
	return cmd
}

func (e *env) printSandbox(sb *sandbox.Sandbox, dir string) {
	fmt.Fprintf(e.stdout, "BFS sandbox running, data in %s\n", dir)
	fmt.Fprintf(e.stdout, "  nameserver   %s\n", sb.NameServerAddr)
	for i, a := range sb.ChunkserverAddrs() {
		fmt.Fprintf(e.stdout, "  chunkserver  %s  (%d)\n", a, i)
	}
	ns := ""
	if sb.NameServerAddr != DefaultNameServer {
		ns = " --nameserver " + sb.NameServerAddr
	}
	fmt.Fprintf(e.stdout, `
Try, from another terminal:
  go run ./tools/bfs%[1]s mkdir -p /demo
  go run ./tools/bfs%[1]s put README.md /demo/readme
  go run ./tools/bfs%[1]s ls -l /demo
  go run ./tools/bfs%[1]s cat /demo/readme
  go run ./tools/bfs%[1]s location /demo/readme

Ctrl-C stops the sandbox.
`, ns)
}
