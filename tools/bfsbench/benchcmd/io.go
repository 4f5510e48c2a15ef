package benchcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

// ioChunk is the size of every write and read of the io benchmark, BFS
// and raw disk alike.
const ioChunk = 1 << 20

type ioOptions struct {
	size        sizeValue
	replication int
	trials      int
}

func defaultIOOptions() ioOptions { return ioOptions{size: 256 << 20, replication: 3, trials: 3} }

// register adds the flags, each name prefixed with prefix ("io-" under all).
func (o *ioOptions) register(f *pflag.FlagSet, prefix string) {
	f.Var(&o.size, prefix+"size", "size of the file put and got (e.g. 256MiB, 1GiB)")
	f.IntVar(&o.replication, prefix+"replication", o.replication, "replicas of the file")
	f.IntVar(&o.trials, prefix+"trials", o.trials, "put/get trials (each with its own raw-disk baseline)")
}

func (o *ioOptions) validate(prefix string) error {
	switch {
	case o.size <= 0:
		return fmt.Errorf("--%ssize must be positive, got %s", prefix, o.size.String())
	case o.replication < 1:
		return fmt.Errorf("--%sreplication must be at least 1, got %d", prefix, o.replication)
	case o.trials < 1:
		return fmt.Errorf("--%strials must be at least 1, got %d", prefix, o.trials)
	}
	return nil
}

func newIOCmd(c *common) *cobra.Command {
	o := defaultIOOptions()
	cmd := &cobra.Command{
		Use:   "io",
		Short: "Put and get throughput of one file, next to the raw sequential speed of the same disk",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommand(cmd, func() error { return o.validate("") }, o.run, ioChart)
	return cmd
}

// ioRows are the names of the io benchmark's throughput rows.
var ioRows = []string{"raw write", "raw read", "put", "get"}

// ioTrial is what one trial measured, in MB/s.
type ioTrial struct{ rawWrite, rawRead, put, get float64 }

func (o *ioOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	if cl.local() && o.replication > sandboxChunkservers {
		return nil, fmt.Errorf("--replication %d: the sandbox has %d chunkservers", o.replication, sandboxChunkservers)
	}
	rawDir := cl.dir
	if !cl.local() {
		d, err := os.MkdirTemp("", "bfsbench-raw-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		rawDir = d
	}
	client, err := sdk.Dial(ctx, cl.addr, cl.creds())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	dir := c.root() + "/io"
	if err := client.MkdirAll(ctx, dir, 0o755); err != nil {
		return nil, err
	}
	b := &ioBench{o: o, c: c, cl: cl, client: client, pattern: newPattern(), rawPath: filepath.Join(rawDir, "raw-disk.bin")}
	var results []bench.Result
	var trials []ioTrial
	for t := 1; t <= o.trials; t++ {
		tr, rs, err := b.trial(ctx, t, fmt.Sprintf("%s/trial-%d", dir, t))
		if err != nil {
			return nil, fmt.Errorf("io trial %d: %w", t, err)
		}
		trials = append(trials, tr)
		results = append(results, rs...)
	}
	return append(results, b.summary(trials)...), nil
}

// ioBench is one run of the io benchmark.
type ioBench struct {
	o       *ioOptions
	c       *common
	cl      *cluster
	client  *sdk.Client
	pattern pattern
	rawPath string
	// dropWarnings say which page cache drops did not work (more than 5%
	// of the bytes still resident afterwards).
	dropWarnings []string
}

func (b *ioBench) trial(ctx context.Context, t int, path string) (ioTrial, []bench.Result, error) {
	size := int64(b.o.size)
	param := fmt.Sprintf("trial %d", t)
	var tr ioTrial
	var err error
	b.c.progressf("io trial %d: raw write of %s...", t, formatSize(size))
	if tr.rawWrite, err = b.rawWrite(size); err != nil {
		return tr, nil, err
	}
	b.c.progressf("io trial %d: raw read...", t)
	if tr.rawRead, err = b.rawRead(size); err != nil {
		return tr, nil, err
	}
	os.Remove(b.rawPath)
	b.c.progressf("io trial %d: put of %s, replication %d...", t, formatSize(size), b.o.replication)
	if tr.put, err = b.put(ctx, path, size); err != nil {
		return tr, nil, err
	}
	b.dropChunkserverCache()
	b.c.progressf("io trial %d: get...", t)
	if tr.get, err = b.get(ctx, path, size); err != nil {
		return tr, nil, err
	}
	if err := b.client.Remove(ctx, path); err != nil {
		return tr, nil, err
	}
	b.c.progressf("io trial %d: put %.1f MB/s, get %.1f MB/s, raw write %.1f MB/s, raw read %.1f MB/s", t, tr.put, tr.get, tr.rawWrite, tr.rawRead)
	return tr, b.rows(param, tr, 1), nil
}

// rows are the four figures of a trial (or of the medians) as results.
func (b *ioBench) rows(param string, tr ioTrial, n int64) []bench.Result {
	row := func(name string, v float64, note string) bench.Result {
		return bench.Result{Name: name, Clients: 1, Param: param, Ops: n, Value: v, Unit: "MB/s", Note: note}
	}
	return []bench.Result{
		row("raw write", tr.rawWrite, b.rawWriteNote()),
		row("raw read", tr.rawRead, b.rawReadNote()),
		row("put", tr.put, fmt.Sprintf("SDK Create (replication %d) + 1 MiB writes + Close, which returns once the nameserver has closed the file (every replica synced and sealed)", b.o.replication)),
		row("get", tr.get, b.getNote()),
	}
}

func (b *ioBench) summary(trials []ioTrial) []bench.Result {
	pick := func(f func(ioTrial) float64) float64 {
		xs := make([]float64, len(trials))
		for i, t := range trials {
			xs[i] = f(t)
		}
		return bench.Median(xs)
	}
	med := ioTrial{
		rawWrite: pick(func(t ioTrial) float64 { return t.rawWrite }),
		rawRead:  pick(func(t ioTrial) float64 { return t.rawRead }),
		put:      pick(func(t ioTrial) float64 { return t.put }),
		get:      pick(func(t ioTrial) float64 { return t.get }),
	}
	n := int64(len(trials))
	rs := b.rows("median", med, n)
	r := float64(b.o.replication)
	ratio := func(name string, num, den float64, note string) bench.Result {
		v := 0.0
		if den > 0 {
			v = num / den
		}
		return bench.Result{Name: name, Clients: 1, Param: "median", Ops: n, Value: v, Unit: "x", Note: note}
	}
	sameDisk := "every replica is written to this one disk"
	if !b.cl.local() {
		sameDisk = "raw figures are of this host's temp dir, not the cluster's disks"
	}
	return append(rs,
		ratio(fmt.Sprintf("put / (raw write / %d)", b.o.replication), med.put, med.rawWrite/r,
			"put throughput over the raw disk's write throughput divided by the replication ("+sameDisk+"); 1.00x = the disk is the only limit"),
		ratio("get / raw read", med.get, med.rawRead, "get throughput over the raw disk's read throughput"))
}

func (b *ioBench) rawWriteNote() string {
	where := "in the cluster's data directory (the chunkservers' disk)"
	if !b.cl.local() {
		where = "in this host's temporary directory (not the cluster's disks)"
	}
	return "Go loop: 1 MiB writes to a new file " + where + ", one fdatasync at the end (a put syncs each replica once, with its last packet, so both are buffered alike); MB = 10^6 bytes"
}

func (b *ioBench) rawReadNote() string {
	if !canDropCache {
		return "the same file read back in 1 MiB reads FROM THE PAGE CACHE (it cannot be dropped on this system)"
	}
	return "the same file read back in 1 MiB reads after posix_fadvise(DONTNEED) dropped it from the page cache" + b.dropNote()
}

func (b *ioBench) getNote() string {
	switch {
	case !b.cl.local():
		return "SDK Open + 1 MiB reads from one replica, verified; the cluster's page cache is not ours to drop, so the read may be from it"
	case !canDropCache:
		return "SDK Open + 1 MiB reads from one replica, verified; FROM THE PAGE CACHE (it cannot be dropped on this system)"
	}
	return "SDK Open + 1 MiB reads from one replica, verified; the chunkservers' files were dropped from the page cache first" + b.dropNote()
}

func (b *ioBench) dropNote() string {
	if len(b.dropWarnings) == 0 {
		return ""
	}
	return " (but the drop did not work: " + strings.Join(b.dropWarnings, "; ") + ")"
}

func mbps(size int64, d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }

func (b *ioBench) rawWrite(size int64) (float64, error) {
	start := time.Now()
	f, err := os.OpenFile(b.rawPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	if err := b.pattern.writeTo(f, size); err != nil {
		f.Close()
		return 0, err
	}
	if err := datasync(f); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return mbps(size, time.Since(start)), nil
}

func (b *ioBench) rawRead(size int64) (float64, error) {
	b.drop(b.rawPath)
	start := time.Now()
	f, err := os.Open(b.rawPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := b.pattern.verify(f, size); err != nil {
		return 0, fmt.Errorf("raw read: %w", err)
	}
	return mbps(size, time.Since(start)), nil
}

func (b *ioBench) put(ctx context.Context, path string, size int64) (float64, error) {
	start := time.Now()
	w, err := b.client.Create(ctx, path, sdk.Replication(b.o.replication))
	if err != nil {
		return 0, err
	}
	if err := b.pattern.writeTo(w, size); err != nil {
		w.CloseContext(ctx)
		return 0, err
	}
	if err := w.CloseContext(ctx); err != nil {
		return 0, err
	}
	d := time.Since(start)
	fi, err := b.client.Stat(ctx, path)
	if err != nil {
		return 0, err
	}
	if fi.Size != size || fi.WriterSession != "" {
		return 0, fmt.Errorf("put %s: after Close the file has %d bytes (open: %v), want %d, closed", path, fi.Size, fi.WriterSession != "", size)
	}
	return mbps(size, d), nil
}

func (b *ioBench) get(ctx context.Context, path string, size int64) (float64, error) {
	start := time.Now()
	r, err := b.client.Open(ctx, path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	if err := b.pattern.verify(r, size); err != nil {
		return 0, fmt.Errorf("get %s: %w", path, err)
	}
	return mbps(size, time.Since(start)), nil
}

// drop drops path from the page cache and checks that it went.
func (b *ioBench) drop(paths ...string) {
	if !canDropCache {
		return
	}
	var total, left int64
	for _, p := range paths {
		if err := dropCache(p); err != nil {
			b.dropWarnings = append(b.dropWarnings, err.Error())
			return
		}
		n, err := resident(p)
		if err != nil {
			b.dropWarnings = append(b.dropWarnings, err.Error())
			return
		}
		left += n
		if st, err := os.Stat(p); err == nil {
			total += st.Size()
		}
	}
	if total > 0 && float64(left) > 0.05*float64(total) {
		w := fmt.Sprintf("%.0f%% of %s still cached", 100*float64(left)/float64(total), formatSize(total))
		b.c.progressf("warning: page cache drop: %s", w)
		b.dropWarnings = append(b.dropWarnings, w)
	}
}

// dropChunkserverCache drops the sandbox chunkservers' files from the
// page cache, so a get reads from disk as the raw read does.
func (b *ioBench) dropChunkserverCache() {
	if !b.cl.local() {
		return
	}
	var files []string
	filepath.WalkDir(b.cl.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.Contains(p, string(filepath.Separator)+"chunkserver-") {
			files = append(files, p)
		}
		return nil
	})
	b.drop(files...)
}

// pattern is the data every transfer writes: one chunk of pseudo-random
// bytes, repeated, so nothing below can compress it and every read is
// verified byte for byte without a second copy of the file.
type pattern []byte

func newPattern() pattern {
	p := make([]byte, ioChunk)
	r := rand.NewChaCha8([32]byte{'b', 'f', 's'})
	r.Read(p)
	return p
}

// writeTo writes size bytes of the pattern to w in ioChunk writes.
func (p pattern) writeTo(w io.Writer, size int64) error {
	for left := size; left > 0; {
		n := min(left, int64(len(p)))
		if _, err := w.Write(p[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

// verify reads exactly size bytes of the pattern from r, in ioChunk reads.
func (p pattern) verify(r io.Reader, size int64) error {
	buf := make([]byte, len(p))
	for off := int64(0); off < size; {
		n := min(size-off, int64(len(buf)))
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return fmt.Errorf("at byte %d of %d: %w", off, size, err)
		}
		if !bytes.Equal(buf[:n], p[:n]) {
			return fmt.Errorf("bytes %d..%d differ from what was written", off, off+n)
		}
		off += n
	}
	if n, err := r.Read(buf[:1]); n != 0 || (err != nil && !errors.Is(err, io.EOF)) {
		return fmt.Errorf("more than the %d bytes written (or a failing end: %v)", size, err)
	}
	return nil
}
