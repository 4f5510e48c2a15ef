package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/sdk"
)

// Every file the fenced holder has open has fenceSynced bytes written and
// synced, then one full SDK packet written and not synced.
const (
	fenceSynced   = 4 << 10
	fenceUnsynced = 256 << 10
	// fenceCloseTimeout bounds closing a fenced writer (it fails fast: the
	// replicas answer SEALED).
	fenceCloseTimeout = 30 * time.Second
)

type fenceOptions struct {
	files    []int
	trials   int
	parallel int
}

func defaultFenceOptions() fenceOptions {
	return fenceOptions{files: []int{1, 10, 100, 1000}, trials: 3, parallel: 16}
}

func (o *fenceOptions) register(f *pflag.FlagSet, prefix string) {
	f.IntSliceVar(&o.files, prefix+"files", o.files, "files the holder has open for write when fenced, one measurement per value")
	f.IntVar(&o.trials, prefix+"trials", o.trials, "fences per --files value")
	f.IntVar(&o.parallel, prefix+"parallel", o.parallel, "goroutines the holder opens and writes its files with")
}

func (o *fenceOptions) validate(prefix string) error {
	if err := validateCounts("--"+prefix+"files", o.files, 100000); err != nil {
		return err
	}
	if o.trials < 1 {
		return fmt.Errorf("--%strials must be at least 1, got %d", prefix, o.trials)
	}
	if o.parallel < 1 {
		return fmt.Errorf("--%sparallel must be at least 1, got %d", prefix, o.parallel)
	}
	return nil
}

func newFenceCmd(c *common) *cobra.Command {
	o := defaultFenceOptions()
	cmd := &cobra.Command{
		Use:   "fence",
		Short: "Fence time: a master force-unlocks a directory whose holder has K files open for write, until UNLOCKED",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommand(cmd, func() error { return o.validate("") }, o.run, fenceChart)
	return cmd
}

const (
	fenceNote = "master's UnlockDir(Force, WaitUnlocked) call → its answer UNLOCKED: every replica of the holder's K open files (3 replicas each, 4 KiB synced + a 256 KiB packet unsynced) sealed, reported with BlockReceived and the files closed"
	toldNote  = "master's UnlockDir call → the holder's Lock.Done() closes (the SDK's WatchDirLocks stream sees the lock leave LOCKED): when a tablet server learns it must stop"
)

// fenceTrial is what one fence measured.
type fenceTrial struct {
	fence time.Duration
	// told is when the holder learned; negative if it never did.
	told time.Duration
}

func (o *fenceOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	holder, err := sdk.Dial(ctx, cl.addr, sdk.WithHolder("bfsbench-fence-holder"), cl.creds())
	if err != nil {
		return nil, err
	}
	defer holder.Close()
	master, err := sdk.Dial(ctx, cl.addr, sdk.WithHolder("bfsbench-fence-master"), cl.adminCreds())
	if err != nil {
		return nil, err
	}
	defer master.Close()
	root := c.root() + "/fence"
	var results []bench.Result
	for _, k := range o.files {
		var fences, told []time.Duration
		var errs int64
		for t := 1; t <= o.trials; t++ {
			dir := fmt.Sprintf("%s/k%d-t%d", root, k, t)
			tr, err := o.trial(ctx, c, holder, master, dir, k)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, errFenceBroken) {
					return nil, err
				}
				c.progressf("fence of %d files, trial %d: %v", k, t, err)
				errs++
				continue
			}
			fences = append(fences, tr.fence)
			if tr.told >= 0 {
				told = append(told, tr.told)
			}
		}
		param := fmt.Sprintf("files=%d", k)
		r := bench.Summarize("fence", 1, fences, errs)
		r.Param, r.Note = param, fenceNote
		r2 := bench.Summarize("holder told", 1, told, int64(o.trials)-errs-int64(len(told)))
		r2.Param, r2.Note = param, toldNote
		results = append(results, r, r2)
	}
	return results, nil
}

// trial locks dir as the holder, opens k files in it with writes in
// flight, and times the master's forced unlock.
func (o *fenceOptions) trial(ctx context.Context, c *common, holder, master *sdk.Client, dir string, k int) (fenceTrial, error) {
	if err := holder.MkdirAll(ctx, dir, 0o755); err != nil {
		return fenceTrial{}, err
	}
	lock, err := holder.LockDir(ctx, dir)
	if err != nil {
		return fenceTrial{}, err
	}
	// Releases the handle's watch; after the fence the directory is
	// UNLOCKED already, which Unlock accepts.
	defer lock.Unlock(context.WithoutCancel(ctx))
	setup := time.Now()
	writers, err := o.openWriters(ctx, holder, dir, k)
	defer func() { closeFenced(writers) }()
	if err != nil {
		return fenceTrial{}, err
	}
	c.progressf("fence: %d files open for write in %s (setup %v); force-unlocking...", k, dir, time.Since(setup).Round(time.Millisecond))
	tr, err := timeUnlock(ctx, c, master, lock, dir)
	if err != nil {
		return tr, err
	}
	c.progressf("fence: %d files: UNLOCKED after %v", k, tr.fence.Round(time.Microsecond))
	n := closeFenced(writers)
	writers = nil
	if n > 0 {
		return tr, fmt.Errorf("fence %s: %w: %d of %d writers closed successfully after the unlock", dir, errFenceBroken, n, k)
	}
	return tr, checkClosed(ctx, master, dir+"/f0", fenceSynced)
}

// timeUnlock force-unlocks dir, waiting until it is UNLOCKED, and times
// that and the moment the holder's lock handle learns it was lost.
func timeUnlock(ctx context.Context, c *common, master *sdk.Client, lock *sdk.Lock, dir string) (fenceTrial, error) {
	start := time.Now()
	toldAt := make(chan time.Time, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-lock.Done():
			toldAt <- time.Now()
		case <-stop:
		}
	}()
	d, err := master.UnlockDir(ctx, dir, sdk.Force(), sdk.WaitUnlocked())
	tr := fenceTrial{fence: time.Since(start), told: -1}
	if err != nil {
		return tr, err
	}
	if d.Status != sdk.Unlocked {
		return tr, fmt.Errorf("unlock %s answered %v, want unlocked", dir, d.Status)
	}
	select {
	case t := <-toldAt:
		tr.told = t.Sub(start)
	case <-time.After(5 * time.Second):
		c.progressf("fence: the holder was not told within 5s of UNLOCKED")
	}
	return tr, nil
}

// checkClosed checks that a fenced file is closed with every synced byte.
func checkClosed(ctx context.Context, client *sdk.Client, path string, synced int64) error {
	fi, err := client.Stat(ctx, path)
	if err != nil {
		return err
	}
	if fi.WriterSession != "" || fi.Size < synced {
		return fmt.Errorf("fence: after UNLOCKED %s has %d bytes (open: %v), want ≥ %d synced, closed",
			path, fi.Size, fi.WriterSession != "", synced)
	}
	return nil
}

// openWriters opens k files in dir with o.parallel goroutines; each gets
// fenceSynced bytes synced and fenceUnsynced bytes sent unsynced. On error
// the writers opened so far are returned too, for closing.
func (o *fenceOptions) openWriters(ctx context.Context, holder *sdk.Client, dir string, k int) ([]*sdk.Writer, error) {
	writers := make([]*sdk.Writer, k)
	data := make([]byte, fenceSynced+fenceUnsynced)
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range min(o.parallel, k) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < k; i = int(next.Add(1) - 1) {
				w, err := openWriter(ctx, holder, fmt.Sprintf("%s/f%d", dir, i), data)
				writers[i] = w
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return writers, firstErr
}

func openWriter(ctx context.Context, holder *sdk.Client, path string, data []byte) (*sdk.Writer, error) {
	w, err := holder.Create(ctx, path, sdk.Replication(3))
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data[:fenceSynced]); err != nil {
		return w, err
	}
	if err := w.Sync(ctx); err != nil {
		return w, err
	}
	_, err = w.Write(data[fenceSynced:])
	return w, err
}

// closeFenced closes writers in parallel and returns how many closed
// without an error (after a fence: none should).
func closeFenced(writers []*sdk.Writer) int {
	var ok atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, w := range writers {
		if w == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), fenceCloseTimeout)
			defer cancel()
			if w.CloseContext(ctx) == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}
