package benchcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/internal/cbuild"
	"github.com/bfs-go/bfs/sdk"
)

// The tera benchmark measures the C++ adapter as Tera's DFS plugin
// (libbfs_dfs.so, loaded by libbfs/bench/dfs_bench.cc as Tera's loader
// loads it and called through Tera's leveldb::Dfs) beside the Go SDK: one
// file written sequentially and read back, from a C++ process and from a
// Go process (capiloop.go), alternating against one cluster, so that the
// ratio shows what the plugin and the C boundary under it cost.

type teraOptions struct {
	size   sizeValue
	chunk  sizeValue
	trials int
}

func defaultTeraOptions() teraOptions {
	return teraOptions{size: 256 << 20, chunk: 64 << 10, trials: 3}
}

// register adds the flags, each name prefixed with prefix ("tera-" under
// all).
func (o *teraOptions) register(f *pflag.FlagSet, prefix string) {
	f.Var(&o.size, prefix+"size", "size of the file written and read back, by the plugin and by the SDK")
	f.Var(&o.chunk, prefix+"chunk", "bytes per Write and Read call (Tera's leveldb writes a table block or a log record at a time)")
	f.IntVar(&o.trials, prefix+"trials", o.trials, "trials, each writing and reading one file through the plugin and one through the SDK")
}

func (o *teraOptions) validate(prefix string) error {
	switch {
	case o.size <= 0:
		return fmt.Errorf("--%ssize must be positive, got %s", prefix, o.size.String())
	case o.chunk <= 0 || o.chunk > 1<<30:
		return fmt.Errorf("--%schunk must be in (0, 1GiB] (Tera's calls take an int32), got %s", prefix, o.chunk.String())
	case o.trials < 1:
		return fmt.Errorf("--%strials must be at least 1, got %d", prefix, o.trials)
	}
	return nil
}

func newTeraCmd(c *common) *cobra.Command {
	o := defaultTeraOptions()
	cmd := &cobra.Command{
		Use:   "tera",
		Short: "libbfs_dfs.so, Tera's DFS plugin, beside the Go SDK: sequential write and read of one file from C++ and from Go, alternating (needs g++)",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommandOn(cmd, func() error { return o.validate("") }, o.run, teraChart, c.target)
	return cmd
}

// Names of the tera results.
const (
	teraWriteSDK    = "tera write (sdk)"
	teraWritePlugin = "tera write (plugin)"
	teraReadSDK     = "tera read (sdk)"
	teraReadPlugin  = "tera read (plugin)"
	teraWriteRatio  = "tera plugin/sdk write"
	teraReadRatio   = "tera plugin/sdk read"
)

func (o *teraOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	dir, remove, err := buildC(ctx, c,
		cbuild.Program{Out: teraPlugin, Sources: []string{"cpp/bfs_dfs.cc"}, Kind: cbuild.Plugin},
		cbuild.Program{Out: "dfs_bench", Sources: []string{"bench/dfs_bench.cc"}, Kind: cbuild.Loader})
	if err != nil {
		return nil, err
	}
	defer remove()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	client, err := sdk.Dial(ctx, cl.addr, cl.creds())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	b := &teraBench{o: o, c: c, addr: cl.addr, client: client, root: c.root() + "/tera",
		cache: &ioBench{c: c, cl: cl},
		sides: [2]capiSide{
			{name: "sdk", prog: self, env: append(cl.sideEnv(), sdkLoopEnv+"=1")},
			{name: "plugin", prog: filepath.Join(dir, "dfs_bench"), env: append(cl.sideEnv(), "BFS_DFS_PLUGIN="+filepath.Join(dir, teraPlugin))},
		}}
	return b.trials(ctx)
}

// teraPlugin is the file name of the plugin.
const teraPlugin = "libbfs_dfs.so"

// teraBench is one run of the tera benchmark.
type teraBench struct {
	o      *teraOptions
	c      *common
	addr   string
	client *sdk.Client // for checks, outside the measurements
	root   string
	// cache drops the sandbox chunkservers' files from the page cache.
	cache *ioBench
	sides [2]capiSide // Go, then the plugin
}

// teraTrial is what one side measured in one trial, in MB/s.
type teraTrial struct{ write, read float64 }

// trials runs --trials trials, the SDK first in odd ones, and returns
// each trial's rows, the medians and their ratios.
func (b *teraBench) trials(ctx context.Context) ([]bench.Result, error) {
	if err := b.client.MkdirAll(ctx, b.root, 0o755); err != nil {
		return nil, err
	}
	var results []bench.Result
	var got [2][]teraTrial
	for t := 1; t <= b.o.trials; t++ {
		for _, side := range []int{(t + 1) % 2, t % 2} {
			tr, err := b.trial(ctx, b.sides[side], fmt.Sprintf("%s/%s-%d", b.root, b.sides[side].name, t))
			if err != nil {
				return nil, fmt.Errorf("tera trial %d: %w", t, err)
			}
			got[side] = append(got[side], tr)
		}
		s, p := got[0][t-1], got[1][t-1]
		b.c.progressf("tera trial %d: write sdk %.1f MB/s, plugin %.1f MB/s; read sdk %.1f MB/s, plugin %.1f MB/s", t, s.write, p.write, s.read, p.read)
		results = append(results, b.rows(fmt.Sprintf("trial %d", t), 1, s, p)...)
	}
	med := func(side int, f func(teraTrial) float64) float64 {
		var xs []float64
		for _, tr := range got[side] {
			xs = append(xs, f(tr))
		}
		return bench.Median(xs)
	}
	var m [2]teraTrial
	for side := range m {
		m[side] = teraTrial{write: med(side, func(t teraTrial) float64 { return t.write }), read: med(side, func(t teraTrial) float64 { return t.read })}
	}
	n := int64(b.o.trials)
	ratio := func(name string, num, den float64, what string) bench.Result {
		return bench.Result{Name: name, Clients: 1, Param: "median", Ops: n, Value: num / den, Unit: "x",
			Note: "median " + what + " throughput through the plugin over the same through the Go SDK"}
	}
	return append(append(results, b.rows("median", n, m[0], m[1])...),
		ratio(teraWriteRatio, m[1].write, m[0].write, "write"), ratio(teraReadRatio, m[1].read, m[0].read, "read")), nil
}

// trial has side s write --size bytes to path and read them back, checks
// the file, removes it and returns the throughputs the side timed.
func (b *teraBench) trial(ctx context.Context, s capiSide, path string) (teraTrial, error) {
	var tr teraTrial
	var err error
	size := int64(b.o.size)
	args := func(op string) []string {
		return []string{op, b.addr, path, strconv.FormatInt(size, 10), strconv.FormatInt(int64(b.o.chunk), 10)}
	}
	if tr.write, err = s.transfer(ctx, size, args("write")...); err != nil {
		return tr, err
	}
	if err := checkWritten(ctx, b.client, path, size); err != nil {
		return tr, err
	}
	b.cache.dropChunkserverCache()
	if tr.read, err = s.transfer(ctx, size, args("read")...); err != nil {
		return tr, err
	}
	return tr, b.client.Remove(ctx, path)
}

// rows are the four throughputs of a trial (or of the medians).
func (b *teraBench) rows(param string, n int64, sdkSide, plugin teraTrial) []bench.Result {
	chunk := formatSize(int64(b.o.chunk))
	writeNote := fmt.Sprintf("one file of --size created, written in %s writes and closed (3 replicas, sealed, closed on the nameserver), timed from the open to the close: Tera's OpenFile(2)/Write/CloseFile through libbfs_dfs.so from a C++ process, SDK Create/Write/Close from a Go process; which goes first alternates per trial; MB = 10^6 bytes", chunk)
	readNote := fmt.Sprintf("the same file read back in %s reads to its end, timed from the open to the close: OpenFile(1)/Read/CloseFile through the plugin, SDK Open/Read/Close%s", chunk, b.cacheNote())
	row := func(name string, v float64, note string) bench.Result {
		return bench.Result{Name: name, Clients: 1, Param: param, Ops: n, Value: v, Unit: "MB/s", Note: note}
	}
	return []bench.Result{
		row(teraWriteSDK, sdkSide.write, writeNote), row(teraWritePlugin, plugin.write, writeNote),
		row(teraReadSDK, sdkSide.read, readNote), row(teraReadPlugin, plugin.read, readNote),
	}
}

func (b *teraBench) cacheNote() string {
	switch {
	case !b.cache.cl.local():
		return "; the cluster's page cache is not ours to drop, so the reads may be from it"
	case !canDropCache:
		return "; FROM THE PAGE CACHE (it cannot be dropped on this system)"
	}
	return "; the chunkservers' files were dropped from the page cache first" + b.cache.dropNote()
}

// teraChart draws the two ratios, the plugin over the SDK, beside the
// target.
var teraChart = ratioChart("Tera's DFS plugin over the Go SDK: throughput ratio", "plugin / sdk", "tera plugin/sdk ", teraTarget,
	teraWriteRatio, teraReadRatio)

// teraVerdicts are the tera figures: each side's median throughput and
// the two ratios against their target.
func teraVerdicts(results []bench.Result) []verdict {
	var vs []verdict
	for _, r := range results {
		switch {
		case r.Param == "median" && r.Unit == "MB/s" && (r.Name == teraWriteSDK || r.Name == teraWritePlugin || r.Name == teraReadSDK || r.Name == teraReadPlugin):
			vs = append(vs, verdict{figure: r.Name + " (median)", measured: fmt.Sprintf("%.1f MB/s", r.Value)})
		case r.Name == teraWriteRatio || r.Name == teraReadRatio:
			v := verdict{figure: r.Name, measured: fmt.Sprintf("%.2fx", r.Value)}
			v.target, v.met = atLeast(r.Value, teraTarget, "x")
			vs = append(vs, v)
		}
	}
	return vs
}
