package bfscmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/golang/glog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/nameserver"
)

func (e *env) nameserverCommand() *cobra.Command {
	cfg := nameserver.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "nameserver",
		Short: "Run a nameserver until SIGINT or SIGTERM",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, _ []string) error {
			defaultLogToStderr(cmd.Flags())
			defer glog.Flush()
			return e.serveNameServer(cmd.Context(), cfg)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data directory")
	f.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "gRPC listen address")
	f.StringVar(&cfg.MetricsAddr, "metrics", cfg.MetricsAddr, `Prometheus metrics HTTP address ("" for none)`)
	f.DurationVar(&cfg.DeadTimeout, "dead-timeout", cfg.DeadTimeout, "a chunkserver silent this long is declared dead")
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat", cfg.HeartbeatInterval, "heartbeat interval chunkservers are told to use")
	f.DurationVar(&cfg.ReportInterval, "report-interval", cfg.ReportInterval, "full block report interval chunkservers are told to use")
	f.Float64Var(&cfg.SafeModeThreshold, "safemode-threshold", cfg.SafeModeThreshold,
		"share of known blocks, in (0, 1], that must be reported before safe mode ends by itself")
	f.IntVar(&cfg.SafeModeMinChunkservers, "safemode-min-chunkservers", cfg.SafeModeMinChunkservers,
		"chunkservers that must have sent a full block report before safe mode ends by itself (besides the threshold)")
	f.Int64Var(&cfg.MinFreeBytes, "min-free-bytes", cfg.MinFreeBytes, "a volume with less free space is never picked for a new block (0 for no floor)")
	f.Float64Var(&cfg.MaxVolumeFill, "max-volume-fill", cfg.MaxVolumeFill,
		"share of its capacity, in (0, 1], past which a volume is never picked for a new block (1: up to --min-free-bytes)")
	f.IntVar(&cfg.MinReplication, "min-replication", cfg.MinReplication,
		"fewest replicas a new block may start with when fewer live chunkservers exist than its file's replication")
	f.DurationVar(&cfg.RepairInterval, "repair-interval", cfg.RepairInterval,
		"how often every block's replica count is checked (repairs also follow chunkserver deaths and returns, corrupt reports and closes)")
	f.IntVar(&cfg.RepairMaxCopies, "repair-max-copies", cfg.RepairMaxCopies, "repair copies in flight in the whole cluster")
	f.IntVar(&cfg.RepairMaxCopiesPerServer, "repair-max-copies-per-server", cfg.RepairMaxCopiesPerServer,
		"repair copies in flight per chunkserver, as source and as target together")
	f.DurationVar(&cfg.MinSessionTTL, "min-session-ttl", cfg.MinSessionTTL, "shortest session TTL a client may ask for")
	f.DurationVar(&cfg.MaxSessionTTL, "max-session-ttl", cfg.MaxSessionTTL, "longest session TTL a client may ask for")
	addGlogFlags(f)
	return cmd
}

func (e *env) serveNameServer(ctx context.Context, cfg nameserver.Config) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := nameserver.New(cfg)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return errors.Join(err, srv.Close())
	}
	fmt.Fprintf(e.stdout, "nameserver listening on %s (data %s)\n", lis.Addr(), cfg.DataDir)
	err = srv.Serve(ctx, lis)
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return err
}

// glogFlags are the flags glog registers on the standard flag set; only
// these are offered (a test binary's flag set holds its own flags too).
var glogFlags = []string{
	"v", "vmodule", "logtostderr", "alsologtostderr", "stderrthreshold",
	"log_dir", "log_link", "logbuflevel", "log_backtrace_at",
}

// addGlogFlags lets a daemon command take glog's flags (-v, --logtostderr,
// ...). They set glog's process-wide state.
func addGlogFlags(f *pflag.FlagSet) {
	for _, name := range glogFlags {
		if gf := flag.CommandLine.Lookup(name); gf != nil {
			f.AddGoFlag(gf)
		}
	}
}

// defaultLogToStderr makes a daemon log to stderr unless the command line
// chose otherwise: a daemon's logs belong to whatever supervises it.
func defaultLogToStderr(f *pflag.FlagSet) {
	if f.Lookup("logtostderr") != nil && !f.Changed("logtostderr") && !f.Changed("log_dir") {
		_ = flag.Set("logtostderr", "true")
	}
}
