package bfscmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/golang/glog"
	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/chunkserver"
)

func (e *env) chunkserverCommand() *cobra.Command {
	cfg := chunkserver.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "chunkserver",
		Short: "Run a chunkserver until SIGINT or SIGTERM",
		Args:  cobra.NoArgs,
	}
	data := cfg.DataDir
	cmd.RunE = e.run(func(cmd *cobra.Command, _ []string) error {
		defaultLogToStderr(cmd.Flags())
		defer glog.Flush()
		dirs := strings.Split(data, ",")
		if slices.Contains(dirs, "") {
			return usagef("--data %q names an empty directory", data)
		}
		cfg.DataDir, cfg.DataDirs = "", dirs
		cfg.NameServerAddr = e.nameserver
		var err error
		if cfg.TLS, cfg.Insecure, err = e.nodeCreds(); err != nil {
			return err
		}
		return e.serveChunkserver(cmd.Context(), cfg)
	})
	f := cmd.Flags()
	f.StringVar(&data, "data", data, "data directories, one per disk, comma-separated: each is a volume with its own block store and meta log")
	f.IntVar(&cfg.FailedVolumesTolerated, "failed-volumes-tolerated", cfg.FailedVolumesTolerated,
		"failed volumes the chunkserver keeps serving with; past it, it stops (-1: while one volume is left)")
	f.DurationVar(&cfg.VolumeCheckTimeout, "volume-check-timeout", cfg.VolumeCheckTimeout,
		"how long a check of a volume's disk may take before the volume is taken for hung and goes out of service")
	f.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "gRPC listen address")
	f.StringVar(&cfg.HostID, "host-id", cfg.HostID, "machine name for placing replicas on distinct hosts (default: the advertised address's host)")
	f.StringVar(&cfg.AdvertiseAddr, "advertise", cfg.AdvertiseAddr, "address given to the nameserver and clients (default: the listen address)")
	f.StringVar(&cfg.MetricsAddr, "metrics", cfg.MetricsAddr, `Prometheus metrics HTTP address ("" for none)`)
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat", cfg.HeartbeatInterval, "heartbeat interval")
	f.IntVar(&cfg.MaxCopies, "max-copies", cfg.MaxCopies, "most block copies for re-replication made at once")
	f.Int64Var(&cfg.CopyRate, "copy-rate", cfg.CopyRate, "bytes per second all re-replication copies together may take in (0: no cap)")
	f.Int64Var(&cfg.ScrubRate, "scrub-rate", cfg.ScrubRate, "bytes per second at which the scrubber verifies sealed replicas (0: no scrubber)")
	f.IntVar(&cfg.MaxMessageSize, "max-message-size", cfg.MaxMessageSize, "largest gRPC message received or sent, in bytes")
	f.DurationVar(&cfg.WriteIdleTimeout, "write-idle-timeout", cfg.WriteIdleTimeout,
		"a write stream that sends no packet this long is ended (the SDK opens a new one when its writer goes on)")
	addGlogFlags(f)
	return cmd
}

func (e *env) serveChunkserver(ctx context.Context, cfg chunkserver.Config) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return err
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = lis.Addr().String()
	}
	srv, err := chunkserver.New(cfg)
	if err != nil {
		return errors.Join(err, lis.Close())
	}
	fmt.Fprintf(e.stdout, "chunkserver listening on %s (data %s, nameserver %s)\n", lis.Addr(), strings.Join(cfg.DataDirs, ","), cfg.NameServerAddr)
	err = srv.Serve(ctx, lis)
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return err
}
