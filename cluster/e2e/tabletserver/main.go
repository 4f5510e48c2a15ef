// Command tabletserver is the tablet server the end-to-end tests run as a
// process (see package cluster/e2e/tablet): it locks a tablet directory
// and its locality groups, writes files in them and reports every step as
// a JSON line on stdout.
//
//	tabletserver --nameserver 127.0.0.1:8828 --tablet /tera/t1 --lg lg0 --mode serve
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
	"github.com/bfs-go/bfs/internal/certs"
)

func main() {
	var (
		cfg  tablet.Config
		lgs  string
		mode string
	)
	flag.StringVar(&cfg.NameServer, "nameserver", "127.0.0.1:8828", "nameserver address")
	flag.StringVar(&cfg.CertsDir, "certs-dir", os.Getenv(certs.EnvDir), "certificates directory (default $"+certs.EnvDir+"; none: plaintext)")
	flag.StringVar(&cfg.User, "user", certs.ClientUser, "client certificate to present: client.USER.crt in the certificates directory")
	flag.StringVar(&cfg.Holder, "holder", "", "holder id (default: the SDK's ip:port:timestamp)")
	flag.DurationVar(&cfg.TTL, "ttl", 0, "session TTL (default: the SDK's)")
	flag.StringVar(&cfg.Tablet, "tablet", "/tera/t1", "tablet directory")
	flag.StringVar(&lgs, "lg", "", "comma-separated locality groups (subdirectories, locked too)")
	flag.StringVar(&mode, "mode", string(tablet.Serve), "serve: write until the lock is lost, then try stale operations; hold: write, then hold; rounds: write until the lock is lost, then try stale operations on each command read from stdin")
	flag.IntVar(&cfg.Initial, "initial", 64<<10, "bytes every file gets before ready")
	flag.IntVar(&cfg.MaxAppend, "max-append", 48<<10, "largest append in serve mode")
	flag.IntVar(&cfg.StaleRounds, "stale-rounds", 2, "rounds of stale operations after the lock is lost")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed of the append sizes")
	flag.Parse()
	cfg.Mode = tablet.Mode(mode)
	cfg.Commands = os.Stdin
	if lgs != "" {
		cfg.LGs = strings.Split(lgs, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := tablet.Run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tabletserver:", err)
		os.Exit(1)
	}
}
