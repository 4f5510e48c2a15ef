package benchcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
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
// two to lose, one after the other, and three to hold the replication of
// 3 after both.
const repairChunkservers = 5

type repairOptions struct {
	size     sizeValue
	fileSize sizeValue
	// copyRate is each chunkserver's --copy-rate (the cap on copies while
	// its clients are busy).
	copyRate sizeValue
	// maxCopies is the nameserver's --repair-max-copies-per-server.
	maxCopies int
	// putters clients put files of putSize, for putTime without a repair
	// and then during the second one.
	putters int
	putSize sizeValue
	putTime time.Duration
}

func defaultRepairOptions() repairOptions {
	return repairOptions{size: 256 << 20, fileSize: 8 << 20, copyRate: chunkserver.DefaultCopyRate,
		maxCopies: nameserver.DefaultConfig().RepairMaxCopiesPerServer, putters: 4, putSize: 1 << 20, putTime: 5 * time.Second}
}

func (o *repairOptions) register(f *pflag.FlagSet, prefix string) {
	f.Var(&o.size, prefix+"size", "bytes written (replication 3) before a chunkserver is lost")
	f.Var(&o.fileSize, prefix+"file-size", "size of each file written")
	f.Var(&o.copyRate, prefix+"copy-rate", "each chunkserver's cap on the bytes its copies take in and send per second while its clients are busy (0: none)")
	f.IntVar(&o.maxCopies, prefix+"max-copies", o.maxCopies, "repair copies in flight per chunkserver, as source and as target together")
	f.IntVar(&o.putters, prefix+"putters", o.putters, "clients putting files without a repair, then during one")
	f.Var(&o.putSize, prefix+"put-size", "size of each client put")
	f.DurationVar(&o.putTime, prefix+"put-time", o.putTime, "how long the clients put without a repair")
}

func (o *repairOptions) validate(prefix string) error {
	switch {
	case o.size <= 0 || o.fileSize <= 0 || o.putSize <= 0:
		return fmt.Errorf("--%ssize, --%sfile-size and --%sput-size must be positive, got %s, %s and %s",
			prefix, prefix, prefix, o.size.String(), o.fileSize.String(), o.putSize.String())
	case o.fileSize > o.size:
		return fmt.Errorf("--%sfile-size %s is larger than --%ssize %s", prefix, o.fileSize.String(), prefix, o.size.String())
	case o.copyRate < 0:
		return fmt.Errorf("--%scopy-rate must not be negative, got %s", prefix, o.copyRate.String())
	case o.maxCopies < 1 || o.putters < 1:
		return fmt.Errorf("--%smax-copies and --%sputters must be at least 1, got %d and %d", prefix, prefix, o.maxCopies, o.putters)
	case o.putTime <= 0:
		return fmt.Errorf("--%sput-time must be positive, got %v", prefix, o.putTime)
	}
	return nil
}

func newRepairCmd(c *common) *cobra.Command {
	o := defaultRepairOptions()
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Re-replication after a chunkserver is lost, next to the raw sequential speed of the same disk, and client puts during it",
		Long: `repair starts a cluster of a nameserver and five chunkservers (data in one
temporary directory, so one disk holds every replica), writes --size bytes
in files of --file-size with replication 3, measures the raw disk's
sequential write and read there, drops the chunkservers' files from the
page cache and stops the chunkserver holding the most replicas: from the
moment the nameserver declares it dead until every block has 3 good
replicas again, with no client writing, the bytes of the replicas
re-made over the time taken is the repair throughput. Each copy reads a
replica once and writes one once on the same disk, so the figure is set
against raw write / 2. Then it stops a second chunkserver and --putters
clients put files of --put-size until that repair is over: put latencies
during a repair, and the repair's throughput while it yields to them;
then the same clients put files for --put-time on the same three
chunkservers with no repair running: put latencies without one. It
always starts its own cluster.`,
		Args: cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommandOn(cmd, func() error { return o.validate("") }, o.run, repairChart, o.target(c))
	return cmd
}

// target starts the repair benchmark's cluster: five chunkservers, fast
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
	repairRow       = "repair"
	repairRatioRow  = "repair / (raw write / 2)"
	repairLoadedRow = "repair during puts"
	putQuietRow     = "put, no repair"
	putDuringRow    = "put, during repair"
	putP99RatioRow  = "put p99 during / without repair"
)

// repairBench is one run of the repair benchmark.
type repairBench struct {
	o      *repairOptions
	c      *common
	cl     *cluster
	client *sdk.Client
	io     *ioBench
	// paths are the files whose replicas a repair must make again.
	paths []string
	puts  atomic.Int64
}

func (o *repairOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	if !cl.local() {
		return nil, fmt.Errorf("repair stops chunkservers: it needs a cluster it started (no --nameserver)")
	}
	// An admin: the bench reads the block health (ListChunkservers).
	client, err := sdk.Dial(ctx, cl.addr, cl.adminCreds())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	b := &repairBench{o: o, c: c, cl: cl, client: client,
		io: &ioBench{o: &ioOptions{replication: 3}, c: c, cl: cl, client: client, pattern: newPattern(),
			rawPath: filepath.Join(cl.dir, "raw-disk.bin")}}
	dir := c.root() + "/repair"
	if err := client.MkdirAll(ctx, dir, 0o755); err != nil {
		return nil, err
	}
	size, fileSize := int64(o.size), int64(o.fileSize)
	c.progressf("repair: writing %s in files of %s, replication 3...", formatSize(size), formatSize(fileSize))
	for off := int64(0); off < size; off += fileSize {
		p := fmt.Sprintf("%s/f%05d", dir, len(b.paths))
		if _, err := b.io.put(ctx, p, min(fileSize, size-off)); err != nil {
			return nil, err
		}
		b.paths = append(b.paths, p)
	}
	c.progressf("repair: raw write of %s...", formatSize(size))
	rawWrite, err := b.io.rawWrite(size)
	if err != nil {
		return nil, err
	}
	c.progressf("repair: raw read...")
	rawRead, err := b.io.rawRead(size)
	if err != nil {
		return nil, err
	}
	os.Remove(b.io.rawPath)

	lost, took, err := b.loseOne(ctx, nil)
	if err != nil {
		return nil, err
	}
	repair := mbps(lost, took)
	c.progressf("repair: %s re-made in %v: %.1f MB/s (raw write %.1f MB/s, raw read %.1f MB/s)", formatSize(lost), took.Round(time.Millisecond), repair, rawWrite, rawRead)

	// The second repair, with clients putting files all along.
	var during bench.Result
	lost2, took2, err := b.loseOne(ctx, func(ctx context.Context) error {
		var err error
		during, err = bench.Run(ctx, putDuringRow, o.putters, time.Hour, 0, b.putOp(dir))
		return err
	})
	if err != nil {
		return nil, err
	}
	loaded := mbps(lost2, took2)
	// The same puts on the same chunkservers, the repair over.
	c.progressf("repair: %d clients put files of %s for %v, no repair running...", o.putters, formatSize(int64(o.putSize)), o.putTime)
	quiet, err := bench.Run(ctx, putQuietRow, o.putters, o.putTime, 0, b.putOp(dir))
	if err != nil {
		return nil, err
	}
	c.progressf("repair during puts: %s re-made in %v: %.1f MB/s; put p99 %v, %v without a repair",
		formatSize(lost2), took2.Round(time.Millisecond), loaded, during.P99, quiet.P99)
	return b.rows(rawWrite, rawRead, repair, loaded, lost, lost2, took, took2, quiet, during), nil
}

// putOp puts a file of the put size, a new one each time.
func (b *repairBench) putOp(dir string) bench.Op {
	return func(ctx context.Context, _, _ int) error {
		p := fmt.Sprintf("%s/put%06d", dir, b.puts.Add(1))
		_, err := b.io.put(ctx, p, int64(b.o.putSize))
		return err
	}
}

// loseOne drops the chunkservers' files from the page cache, stops the
// running chunkserver that holds the most replicas and returns the bytes
// it held and the time from its death being declared until every block
// of the benchmark's files has 3 good replicas again. load, if set, runs
// over that time, its context ending when the repair is over.
func (b *repairBench) loseOne(ctx context.Context, load func(context.Context) error) (int64, time.Duration, error) {
	held := make(map[string]int64)
	for _, p := range b.paths {
		loc, err := b.client.Locate(ctx, p)
		if err != nil {
			return 0, 0, err
		}
		for _, blk := range loc.Blocks {
			for _, r := range blk.Replicas {
				held[r] += blk.Size
			}
		}
	}
	addrs := b.cl.sb.ChunkserverAddrs()
	victim := -1
	for i, a := range addrs {
		if a != "" && (victim < 0 || held[a] > held[addrs[victim]]) {
			victim = i
		}
	}
	live := b.cl.sb.NameServer().LiveChunkservers()
	b.io.dropChunkserverCache()
	b.c.progressf("repair: stopping chunkserver %s, which holds %s of replicas...", addrs[victim], formatSize(held[addrs[victim]]))
	if err := b.cl.sb.StopChunkserver(victim); err != nil {
		return 0, 0, err
	}
	ns := b.cl.sb.NameServer()
	if err := poll(ctx, time.Minute, "the nameserver to declare the chunkserver dead", func() (bool, error) {
		return ns.LiveChunkservers() < live, nil
	}); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan error, 1)
	if load != nil {
		go func() { loadDone <- load(loadCtx) }()
	} else {
		loadDone <- nil
	}
	// One call a poll while the repair runs (the nameserver's own count),
	// then every file's stat: polling every file would take from the
	// clients' puts what it measures.
	err := poll(ctx, 10*time.Minute, "every block to have 3 good replicas", func() (bool, error) {
		h, err := b.client.BlockHealth(ctx)
		if err != nil || h.UnderReplicated > 0 || h.RepairInFlight > 0 {
			return false, err
		}
		for _, p := range b.paths {
			fi, err := b.client.Stat(ctx, p)
			if err != nil {
				return false, err
			}
			if fi.LiveReplicas < 3 {
				return false, nil
			}
		}
		return true, nil
	})
	took := time.Since(start)
	stopLoad()
	if lerr := <-loadDone; err == nil {
		err = lerr
	}
	return held[addrs[victim]], took, err
}

// rows are the benchmark's results.
func (b *repairBench) rows(rawWrite, rawRead, repair, loaded float64, lost, lost2 int64, took, took2 time.Duration, quiet, during bench.Result) []bench.Result {
	o := b.o
	row := func(name string, v float64, unit, note string) bench.Result {
		return bench.Result{Name: name, Clients: 1, Ops: 1, Value: v, Unit: unit, Note: note}
	}
	rate := "no copy-rate cap"
	if o.copyRate > 0 {
		rate = "copy-rate " + o.copyRate.String() + "/s per chunkserver while its clients are busy, none while they are idle"
	}
	quiet.Note = fmt.Sprintf("each client puts files of %s (replication 3) back to back for %v, after the second repair, on the same three chunkservers", formatSize(int64(o.putSize)), o.putTime)
	during.Note = fmt.Sprintf("the same puts, from the second chunkserver's death being declared until its %s of replicas are made again", formatSize(lost2))
	p99 := 0.0
	if quiet.P99 > 0 {
		p99 = float64(during.P99) / float64(quiet.P99)
	}
	return []bench.Result{
		row("raw write", rawWrite, "MB/s", b.io.rawWriteNote()),
		row("raw read", rawRead, "MB/s", b.io.rawReadNote()),
		row(repairRow, repair, "MB/s", fmt.Sprintf("%s of replicas lost with a chunkserver of %d, re-made in %v from its death being declared to every block having 3 good replicas, no client writing (%d copies per chunkserver at once, %s); source replicas dropped from the page cache first%s",
			formatSize(lost), repairChunkservers, took.Round(time.Millisecond), o.maxCopies, rate, b.io.dropNote())),
		row(repairRatioRow, repair/(rawWrite/2), "x", "repair throughput over half the raw disk's write throughput (each copy reads once and writes once on this one disk); target ≥ 0.5x"),
		quiet,
		during,
		row(repairLoadedRow, loaded, "MB/s", fmt.Sprintf("%s of replicas lost with a second chunkserver, re-made in %v while %d clients put files: the copies yield to them", formatSize(lost2), took2.Round(time.Millisecond), o.putters)),
		row(putP99RatioRow, p99, "x", "put p99 during the second repair over put p99 without a repair; read beside the repair figures"),
	}
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
