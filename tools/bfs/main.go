// Command bfs runs the BFS-Go daemons and the file commands. Everything is
// in package bfscmd; see `bfs --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bfs-go/bfs/tools/bfs/bfscmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bfscmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
