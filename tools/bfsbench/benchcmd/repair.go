package benchcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/sdk"
)

// repairChunkservers is how many chunkservers the repair benchmark runs:
// one to lose and three to hold the replication of 3 after it.
const repairChunkservers = 4

type repairOptions struct {
	size     sizeValue
	fileSize sizeValue
	// copyRate is each chunkserver's --copy-rate.
	copyRate sizeValue
	// maxCopies is the nameserver's --repair-max-copies-per-server.
	maxCopies int
}

func defaultRepairOptions() repairOptions {
	return repairOptions{size: 256 << 20, fileSize: 8 << 20, copyRate: chunkserver.DefaultCopyRate,
		maxCopies: nameserver.DefaultConfig().RepairMaxCopiesPerServer}
}

func (o *repairOptions) register(f *pflag.FlagSet, prefix string) {
	f.Var(&o.size, prefix+"size", "bytes written (replication 3) before a chunkserver is lost")
	f.Var(&o.fileSize, prefix+"file-size", "size of each file written")
	f.Var(&o.copyRate, prefix+"copy-rate", "each chunkserver's cap on the bytes its copies take in per second (0: none)")
	f.IntVar(&o.maxCopies, prefix+"max-copies", o.maxCopies, "repair copies in flight per chunkserver, as source and as target together")
}

func (o *repairOptions) validate(prefix string) error {
	switch {
	case o.size <= 0 || o.fileSize <= 0:
		return fmt.Errorf("--%ssize and --%sfile-size must be positive, got %s and %s", prefix, prefix, o.size.String(), o.fileSize.String())
	case o.fileSize > o.size:
		return fmt.Errorf("--%sfile-size %s is larger than --%ssize %s", prefix, o.fileSize.String(), prefix, o.size.String())
	case o.copyRate < 0:
		return fmt.Errorf("--%scopy-rate must not be negative, got %s", prefix, o.copyRate.String())
	case o.maxCopies < 1:
		return fmt.Errorf("--%smax-copies must be at least 1, got %d", prefix, o.maxCopies)
	}
	return nil
}

func newRepairCmd(c *common) *cobra.Command {
	o := defaultRepairOptions()
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Re-replication after a chunkserver is lost, next to the raw sequential speed of the same disk",
		Long: `repair starts a cluster of a nameserver and four chunkservers (data in one
temporary directory, so one disk holds every replica), writes --size bytes
in files of --file-size with replication 3, measures the raw disk's
sequential write and read there, drops the chunkservers' files from the
page cache, and stops the chunkserver holding the most replicas. From the
moment the nameserver declares it dead until every block has 3 live
replicas again, the bytes of the replicas re-made over the time taken is
the repair throughput. Each copy reads a replica once and writes one once
on the same disk, so the figure is set against raw write / 2. It always
starts its own cluster.`,
		Args: cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommandOn(cmd, func() error { return o.validate("") }, o.run, repairChart, o.target(c))
	return cmd
}

// target starts the repair benchmark's cluster: four chunkservers, fast
// failure detection and a frequent repair scan, so that the measurement
// is of the copies, not of the timers; with TLS unless --insecure.
func (o *repairOptions) target(c *common) startFunc {
	return func(ctx context.Context) (*cluster, error) { return o.start(ctx, !c.insecure) }
}

func (o *repairOptions) start(ctx context.Context, secure bool) (*cluster, error) {
	dir, err := os.MkdirTemp("", "bfsbench-repair-")
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.Start(sandbox.Config{Dir: dir, Chunkservers: repairChunkservers, Insecure: !secure,
		NameServer: func(_ int, cfg *nameserver.Config) {
			cfg.HeartbeatInterval = 100 * time.Millisecond
			cfg.DeadTimeout = time.Second
			cfg.RepairInterval = 200 * time.Millisecond
			cfg.RepairMaxCopiesPerServer = o.maxCopies
			cfg.MinFreeBytes = 0
		},
		Chunkserver: func(_ int, cfg *chunkserver.Config) {
			cfg.CopyRate = int64(o.copyRate)
			cfg.MaxCopies = max(cfg.MaxCopies, o.maxCopies)
		},
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cl := &cluster{addr: sb.NameServerAddr, certsDir: sb.CertsDir(), dir: dir, sb: sb, stop: func() {
		sb.Close()
		os.RemoveAll(dir)
	}}
	if err := waitChunkservers(ctx, sb, repairChunkservers); err != nil {
		cl.stop()
		return nil, err
	}
	return cl, nil
}

const (
	repairRow      = "repair"
	repairRatioRow = "repair / (raw write / 2)"
)

func (o *repairOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	if !cl.local() {
		return nil, fmt.Errorf("repair stops a chunkserver: it needs a cluster it started (no --nameserver)")
	}
	client, err := sdk.Dial(ctx, cl.addr, cl.creds())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	b := &ioBench{o: &ioOptions{replication: 3}, c: c, cl: cl, client: client, pattern: newPattern(),
		rawPath: filepath.Join(cl.dir, "raw-disk.bin")}
	dir := c.root() + "/repair"
	if err := client.MkdirAll(ctx, dir, 0o755); err != nil {
		return nil, err
	}
	size, fileSize := int64(o.size), int64(o.fileSize)
	c.progressf("repair: writing %s in files of %s, replication 3...", formatSize(size), formatSize(fileSize))
	var paths []string
	for off := int64(0); off < size; off += fileSize {
		p := fmt.Sprintf("%s/f%05d", dir, len(paths))
		if _, err := b.put(ctx, p, min(fileSize, size-off)); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	c.progressf("repair: raw write of %s...", formatSize(size))
	rawWrite, err := b.rawWrite(size)
	if err != nil {
		return nil, err
	}
	c.progressf("repair: raw read...")
	rawRead, err := b.rawRead(size)
	if err != nil {
		return nil, err
	}
	os.Remove(b.rawPath)

	// The chunkserver to lose: the one holding most replicas, and the
	// bytes the others must copy, from the block locations.
	held := make(map[string]int64)
	for _, p := range paths {
		loc, err := client.Locate(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, blk := range loc.Blocks {
			for _, r := range blk.Replicas {
				held[r] += blk.Size
			}
		}
	}
	addrs := cl.sb.ChunkserverAddrs()
	victim := 0
	for i, a := range addrs {
		if held[a] > held[addrs[victim]] {
			victim = i
		}
	}
	lost := held[addrs[victim]]
	b.dropChunkserverCache()
	c.progressf("repair: stopping chunkserver %s, which holds %s of replicas...", addrs[victim], formatSize(lost))
	if err := cl.sb.StopChunkserver(victim); err != nil {
		return nil, err
	}
	ns := cl.sb.NameServer()
	if err := poll(ctx, time.Minute, "the nameserver to declare the chunkserver dead", func() (bool, error) {
		return ns.LiveChunkservers() < repairChunkservers, nil
	}); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := poll(ctx, 10*time.Minute, "every block to have 3 live replicas", func() (bool, error) {
		for _, p := range paths {
			fi, err := client.Stat(ctx, p)
			if err != nil {
				return false, err
			}
			if fi.LiveReplicas < 3 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	took := time.Since(start)
	repair := mbps(lost, took)
	c.progressf("repair: %s re-made in %v: %.1f MB/s (raw write %.1f MB/s, raw read %.1f MB/s)", formatSize(lost), took.Round(time.Millisecond), repair, rawWrite, rawRead)
	row := func(name string, v float64, unit, note string) bench.Result {
		return bench.Result{Name: name, Clients: 1, Ops: 1, Value: v, Unit: unit, Note: note}
	}
	rate := "no copy-rate cap"
	if o.copyRate > 0 {
		rate = "copy-rate " + o.copyRate.String() + "/s per chunkserver"
	}
	return []bench.Result{
		row("raw write", rawWrite, "MB/s", b.rawWriteNote()),
		row("raw read", rawRead, "MB/s", b.rawReadNote()),
		row(repairRow, repair, "MB/s", fmt.Sprintf("%s of replicas lost with a chunkserver of %d, re-made in %v from its death being declared to every block having 3 live replicas (%d copies per chunkserver at once, %s); source replicas dropped from the page cache first%s",
			formatSize(lost), repairChunkservers, took.Round(time.Millisecond), o.maxCopies, rate, b.dropNote())),
		row(repairRatioRow, repair/(rawWrite/2), "x", "repair throughput over half the raw disk's write throughput (each copy reads once and writes once on this one disk); target ≥ 0.5x"),
	}, nil
}

func repairChart(results []bench.Result) (*plot.Plot, error) {
	get := func(name string) (float64, bool) {
		r, ok := find(results, name, 1, "")
		return r.Value, ok
	}
	w, ok1 := get("raw write")
	r, ok2 := get("raw read")
	rep, ok3 := get(repairRow)
	if !ok1 || !ok2 || !ok3 {
		return nil, errNoData("repair")
	}
	p := newChart("Re-replication vs the raw disk", "", "MB/s")
	vs := plotter.Values{w, w / 2, r, rep}
	bars, err := plotter.NewBarChart(vs, vg.Points(50))
	if err != nil {
		return nil, err
	}
	bars.Color = plotutil.Color(0)
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalX("raw write", "raw write / 2", "raw read", "repair")
	return p, nil
}
