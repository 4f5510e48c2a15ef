// Command lockctl is the operators' tool for BFS-Go directory locks. All of
// it is in package lockcmd; see `lockctl --help` for the commands and the
// exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bfs-go/bfs/tools/lockctl/lockcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := lockcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
