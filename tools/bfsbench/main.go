// Command bfsbench runs BFS-Go's benchmarks. See BUILD.md.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/bfs-go/bfs/tools/bfsbench/benchcmd"
)

func main() {
	// The Go side of the capi benchmark is this binary run again.
	if code, ok := benchcmd.SDKLoop(os.Args[1:], os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := benchcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
