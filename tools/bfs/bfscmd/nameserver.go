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

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/nameserver/replica"
)

func (e *env) nameserverCommand() *cobra.Command {
	cfg := nameserver.DefaultConfig()
	var initialCluster string
	var pause testingPause
	cmd := &cobra.Command{
		Use:   "nameserver",
		Short: "Run a nameserver (a member of a nameserver group) until SIGINT or SIGTERM",
		Long: `Runs a nameserver. Without --initial-cluster it is a group of one; with
it, the nodes named bootstrap the group the first time their data
directories are empty (afterwards the flag must not contradict what they
stored). A nameserver to be added to a running group starts with --join
and is added with 'bfs cluster add NAME RAFT_ADDRESS'.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, _ []string) error {
			defaultLogToStderr(cmd.Flags())
			defer glog.Flush()
			peers, err := parseInitialCluster(initialCluster)
			if err != nil {
				return err
			}
			cfg.InitialCluster = peers
			if cfg.Join && len(peers) > 0 {
				return usagef("--join and --initial-cluster: a joining member bootstraps nothing")
			}
			if cfg.TLS, cfg.Insecure, err = e.nodeCreds(); err != nil {
				return err
			}
			pause.install(&cfg, e.stdout)
			return e.serveNameServer(cmd.Context(), cfg)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data directory")
	f.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "gRPC listen address for clients")
	f.StringVar(&cfg.Advertise, "advertise", "", "client address this nameserver publishes to the group (default: the address --listen bound; give one when listening on a wildcard address)")
	f.StringVar(&cfg.Name, "id", cfg.Name, "this nameserver's name in its group")
	f.StringVar(&cfg.RaftListen, "raft-listen", cfg.RaftListen, "address this nameserver listens on for its peers (a fixed one for a member of a group; a group of one may take any free port)")
	f.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "address its peers dial (default: --raft-listen)")
	f.StringVar(&initialCluster, "initial-cluster", "", "the group to bootstrap: NAME=RAFT_ADDRESS,... (each member's advertised raft address)")
	f.BoolVar(&cfg.Join, "join", false, "join a running group (bfs cluster add) instead of bootstrapping one")
	f.DurationVar(&cfg.Raft.HeartbeatTimeout, "raft-heartbeat-timeout", replica.DefaultHeartbeatTimeout,
		"a follower that hears nothing from the leader this long starts an election")
	f.DurationVar(&cfg.Raft.ElectionTimeout, "raft-election-timeout", replica.DefaultElectionTimeout, "how long a candidate waits for votes")
	f.Uint64Var(&cfg.Raft.SnapshotThreshold, "raft-snapshot-threshold", replica.DefaultSnapshotThreshold,
		"log entries applied since the last snapshot before the next one")
	f.DurationVar(&cfg.Raft.SnapshotInterval, "raft-snapshot-interval", replica.DefaultSnapshotInterval,
		"how often to check whether --raft-snapshot-threshold entries were applied since the last snapshot (at random between this and twice this)")
	f.Uint64Var(&cfg.Raft.TrailingLogs, "raft-trailing-logs", replica.DefaultTrailingLogs,
		"log entries kept after a snapshot, for followers a little behind; one further behind is sent the snapshot")
	f.StringVar(&cfg.MetricsAddr, "metrics", cfg.MetricsAddr, `HTTP address of the status page (/) and Prometheus metrics (/metrics); "" for none`)
	f.BoolVar(&cfg.StatusPublic, "status-public", cfg.StatusPublic,
		"with --insecure (no identities), serve the status page and its JSON to every client, not only to loopback ones; over TLS the page answers admin certificates only")
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
	f.DurationVar(&cfg.BlockTokenLifetime, "block-token-lifetime", nameserver.DefaultBlockTokenLifetime,
		"how long a block token (what chunkservers ask readers and writers for) is good for")
	f.DurationVar(&cfg.BlockKeyRotation, "block-key-rotation", nameserver.DefaultBlockKeyRotation,
		"how often the leader makes a new key to sign block tokens with (at least twice --block-token-lifetime)")
	f.DurationVar(&cfg.UnallocatedGrace, "unallocated-grace", nameserver.DefaultUnallocatedGrace,
		"how long a replica of a block id the namespace never allocated is kept before it is deleted (negative: for ever)")
	f.DurationVar(&cfg.MinSessionTTL, "min-session-ttl", cfg.MinSessionTTL, "shortest session TTL a client may ask for")
	f.DurationVar(&cfg.MaxSessionTTL, "max-session-ttl", cfg.MaxSessionTTL, "longest session TTL a client may ask for")
	addTestingPauseFlag(f, &pause)
	addLimitFlags(f, &cfg.Limits)
	addGlogFlags(f)
	return cmd
}

// addLimitFlags offers the nameserver's limits (BUILD.md "Limits"):
// each refusal is RESOURCE_EXHAUSTED, counted in
// bfs_nameserver_limit_refusals_total{limit}.
func addLimitFlags(f *pflag.FlagSet, l *nameserver.Limits) {
	f.IntVar(&l.MaxMessageSize, "max-message-size", l.MaxMessageSize, "largest gRPC message received or sent, in bytes")
	f.IntVar(&l.MaxWatchesPerIdentity, "max-watches-per-identity", l.MaxWatchesPerIdentity,
		"lock watch streams of a prefix (WatchDirLocks) one client identity may have open")
	f.IntVar(&l.MaxWatches, "max-watches", l.MaxWatches, "lock watch streams of a prefix of all identities together")
	f.IntVar(&l.MaxWatchesPerSession, "max-watches-per-session", l.MaxWatchesPerSession,
		"lock watch streams of one session's locks open at once (the SDK keeps one per session)")
	f.IntVar(&l.WatchBuffer, "watch-buffer", l.WatchBuffer,
		"lock transitions a watch keeps for a slow watcher; one further behind is cut off and must list again")
	f.IntVar(&l.MaxSessionsPerIdentity, "max-sessions-per-identity", l.MaxSessionsPerIdentity, "live sessions one client identity may hold")
	f.IntVar(&l.MaxSessions, "max-sessions", l.MaxSessions, "live sessions of all identities together")
	f.IntVar(&l.MaxLockWaitsPerIdentity, "max-lock-waits-per-identity", l.MaxLockWaitsPerIdentity,
		"LockDir and UnlockDir calls of one identity waiting (with wait) at once")
}

func (e *env) serveNameServer(ctx context.Context, cfg nameserver.Config) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The client port first: a Raft port left to the kernel (a group of
	// one without --raft-listen) must not take the client port a
	// restarted nameserver was just given back.
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return err
	}
	srv, err := nameserver.New(cfg)
	if err != nil {
		return errors.Join(err, lis.Close())
	}
	fmt.Fprintf(e.stdout, "nameserver listening on %s (data %s)\n", lis.Addr(), cfg.DataDir)
	err = srv.Serve(ctx, lis)
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return err
}

// nodeCreds are a daemon's certificates (node.crt in the certificates
// directory the flags name), or insecure with --insecure.
func (e *env) nodeCreds() (creds *certs.Creds, insecure bool, err error) {
	dir, err := certs.ResolveDir(e.certsDir, e.insecure)
	if err != nil || dir == "" {
		return nil, e.insecure, err
	}
	creds, err = certs.LoadNode(dir)
	return creds, false, err
}

// glogFlags are the flags glog registers on the standard flag set; only
// these are offered (a test binary's flag set holds its own flags too).
var glogFlags = []string{
	"v", "vmodule", "logtostderr", "alsologtostderr", "stderrthreshold",
	"log_dir", "log_link", "logbuflevel", "log_backtrace_at",
}

// addGlogFlags lets a daemon command take glog's flags. They set glog's
// process-wide state. Its --help shows -v and --log-dir (glog's
// --log_dir in the style of the other flags); the rest are hidden, and
// `bfs help logging` describes them all.
func addGlogFlags(f *pflag.FlagSet) {
	for _, name := range glogFlags {
		gf := flag.CommandLine.Lookup(name)
		if gf == nil {
			continue
		}
		f.AddGoFlag(gf)
		if name == "v" {
			f.Lookup(name).Usage = "log verbosity: 1 for more detail, 2 for much more (bfs help logging)"
			continue
		}
		_ = f.MarkHidden(name) // the flag was just added
		if name == "log_dir" {
			dir := pflag.PFlagFromGoFlag(gf)
			dir.Name, dir.Usage = "log-dir", "write log files in this directory instead of logging to stderr"
			f.AddFlag(dir)
		}
	}
}

// defaultLogToStderr makes a daemon log to stderr unless the command line
// chose otherwise: a daemon's logs belong to whatever supervises it.
func defaultLogToStderr(f *pflag.FlagSet) {
	if f.Lookup("logtostderr") != nil && !f.Changed("logtostderr") && !f.Changed("log_dir") && !f.Changed("log-dir") {
		// glog reads the flag whenever it logs: set it only if it
		// changes (a test runs daemons in-process side by side).
		if g := flag.Lookup("logtostderr"); g != nil && g.Value.String() != "true" {
			_ = flag.Set("logtostderr", "true")
		}
	}
}

// loggingHelp is `bfs help logging`: every flag of the daemons' logs.
func loggingHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "logging",
		Short: "The flags of the daemons' logs (glog)",
		Long: `The daemons (bfs nameserver, chunkserver and sandbox) log through glog,
to stderr unless --log-dir is given. Their --help shows the two flags
most runs need:

  -v N                       verbosity of the detail logs: 1 for more, 2 for much more
  --log-dir DIR              write log files in DIR (one per severity, rotated by size)
                             instead of logging to stderr; also spelt --log_dir

and takes glog's other flags, hidden there:

  --vmodule PATTERN=N,...    verbosity by source file, e.g. --vmodule=cleaner=2,closer=1
  --logtostderr              log to stderr only (the default without --log-dir)
  --alsologtostderr          log to stderr as well as to the files of --log-dir
  --stderrthreshold LEVEL    with --log-dir, copy logs at or above LEVEL (INFO, WARNING,
                             ERROR, FATAL) to stderr too (default ERROR)
  --log_link DIR             put symbolic links to the current log files in DIR
  --logbuflevel N            buffer log lines of severity N and below before writing
                             them (-1: write every line at once)
  --log_backtrace_at FILE:N  write a stack trace when the log line at FILE:N is reached`,
	}
}
