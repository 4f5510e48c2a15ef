package bfscmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/sdk"
)

// The failover demo: the story of SPEC §1 told against a running sandbox.
const (
	demoDir   = "/demo/t1"
	demoFile  = demoDir + "/log"
	demoBytes = 1 << 20
	// demoTimeout bounds the whole demo.
	demoTimeout = time.Minute
)

// demo is one run of the failover demo: tablet server A, tablet server B
// and the master, each an SDK client of the sandbox, and the numbered
// narration.
type demo struct {
	out              io.Writer
	step             int
	a, b, master     *sdk.Client
	replication      int
	heldA            *sdk.Lock
	writerA          *sdk.Writer
	data             []byte
	replicas         []string
	epochA, epochB   uint64
	holderA, holderB string
}

// runDemo runs the failover demo against sb, narrating to e.stdout.
func (e *env) runDemo(ctx context.Context, sb *sandbox.Sandbox, chunkservers int) (err error) {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	d := &demo{out: e.stdout, replication: min(3, chunkservers), holderA: "tablet-a", holderB: "tablet-b"}
	fmt.Fprintf(d.out, "\nFailover demo on %s:\n", demoDir)
	if err := waitChunkservers(ctx, sb, chunkservers); err != nil {
		return err
	}
	closeClients, err := d.dial(ctx, sb)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeClients()) }()
	for _, step := range []func(context.Context) error{
		d.reset, d.lockA, d.writeA, d.forceUnlock, d.lossSeen, d.lockB, d.readB, d.fenced,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.out, "Done: A is fenced, B took %s over, and every byte A synced survived.\n", demoDir)
	return nil
}

// dial makes the clients of A, B and the master, and returns what closes
// them.
func (d *demo) dial(ctx context.Context, sb *sandbox.Sandbox) (closeAll func() error, err error) {
	var clients []*sdk.Client
	closeAll = func() error {
		var errs []error
		for _, c := range clients {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	for _, who := range []struct {
		c            **sdk.Client
		holder, user string
	}{{&d.a, d.holderA, certs.ClientUser}, {&d.b, d.holderB, certs.ClientUser}, {&d.master, "master", certs.AdminUser}} {
		c, err := sdk.Dial(ctx, sb.NameServerAddr, sdk.WithHolder(who.holder), sb.ClientOption(who.user))
		if err != nil {
			return nil, errors.Join(err, closeAll())
		}
		*who.c = c
		clients = append(clients, c)
	}
	return closeAll, nil
}

// say prints one numbered step of the narration.
func (d *demo) say(format string, args ...any) {
	d.step++
	fmt.Fprintf(d.out, "  %2d. %s\n", d.step, fmt.Sprintf(format, args...))
}

func ms(dur time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(dur.Microseconds())/1000)
}

// waitChunkservers waits until n chunkservers have registered.
func waitChunkservers(ctx context.Context, sb *sandbox.Sandbox, n int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for sb.NameServer().LiveChunkservers() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d chunkservers to register: %w", n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// reset removes what an earlier demo on the same data left.
func (d *demo) reset(ctx context.Context) error {
	if _, err := d.master.Stat(ctx, demoDir); errors.Is(err, sdk.ErrNotFound) {
		return d.master.MkdirAll(ctx, demoDir, 0)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "      (removing %s, left by an earlier demo)\n", demoDir)
	if _, err := d.master.UnlockDir(ctx, demoDir, sdk.Force(), sdk.WaitUnlocked()); err != nil {
		return err
	}
	if err := d.master.RemoveDir(ctx, demoDir, true); err != nil {
		return err
	}
	return d.master.MkdirAll(ctx, demoDir, 0)
}

func (d *demo) lockA(ctx context.Context) error {
	start := time.Now()
	l, err := d.a.LockDir(ctx, demoDir)
	if err != nil {
		return err
	}
	d.heldA, d.epochA = l, l.Epoch()
	d.say("tablet server A (%s) locks %s: epoch %d (%s)", d.holderA, demoDir, d.epochA, ms(time.Since(start)))
	return nil
}

func (d *demo) writeA(ctx context.Context) error {
	start := time.Now()
	w, err := d.a.Create(ctx, demoFile, sdk.Replication(d.replication))
	if err != nil {
		return err
	}
	d.writerA = w
	d.data = make([]byte, demoBytes)
	r := rand.NewChaCha8([32]byte{'b', 'f', 's'})
	r.Read(d.data)
	if _, err := w.Write(d.data); err != nil {
		return err
	}
	if err := w.Sync(ctx); err != nil {
		return err
	}
	took := time.Since(start)
	loc, err := d.a.Locate(ctx, demoFile)
	if err != nil {
		return err
	}
	if len(loc.Blocks) == 1 {
		d.replicas = loc.Blocks[0].Replicas
	}
	d.say("A writes and syncs %d bytes to %s, on %d chunkservers (%s)", len(d.data), demoFile, len(d.replicas), ms(took))
	return nil
}

// forceUnlock is the master's failover: it force-unlocks A's directory and
// watches it go through CLEANING to UNLOCKED.
func (d *demo) forceUnlock(ctx context.Context) error {
	d.say("the master declares A dead and force-unlocks %s (epoch %d)", demoDir, d.epochA)
	watch, err := d.master.WatchDirLocks(ctx, demoDir)
	if err != nil {
		return err
	}
	defer watch.Close()
	start := time.Now()
	st, err := d.master.UnlockDir(ctx, demoDir, sdk.Force(), sdk.AtEpoch(d.epochA))
	if err != nil {
		return err
	}
	if st.Status == sdk.Cleaning {
		d.say("%s is CLEANING: sealing 1 file on %d chunkservers, new mutations refused (%s)",
			demoDir, len(d.replicas), ms(time.Since(start)))
		if err := waitUnlocked(watch); err != nil {
			return err
		}
	}
	unlocked := time.Since(start)
	hist, err := d.master.LockHistory(ctx, demoDir)
	if err != nil || len(hist) == 0 {
		return errors.Join(err, fmt.Errorf("no lock history for %s", demoDir))
	}
	h := hist[len(hist)-1]
	fi, err := d.master.Stat(ctx, demoFile)
	if err != nil {
		return err
	}
	d.say("%s is UNLOCKED after %s: %d file sealed, closed at %d bytes, %d bytes truncated",
		demoDir, ms(unlocked), h.FilesSealed, fi.Size, h.BytesTruncated)
	return nil
}

// waitUnlocked reads lock transitions until demoDir is UNLOCKED.
func waitUnlocked(watch *sdk.LockWatch) error {
	for {
		ev, err := watch.Next()
		if err != nil {
			return fmt.Errorf("watching %s: %w", demoDir, err)
		}
		if ev.Lock.Path == demoDir && ev.Lock.Status == sdk.Unlocked {
			return nil
		}
	}
}

// lossSeen shows A's lock handle reporting the loss, as a tablet server
// learns it must stop serving.
func (d *demo) lossSeen(ctx context.Context) error {
	select {
	case <-d.heldA.Done():
		d.say("A's lock handle reports the loss: %v", d.heldA.Err())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tablet server A's lock handle never reported the loss: %w", ctx.Err())
	}
}

func (d *demo) lockB(ctx context.Context) error {
	start := time.Now()
	l, err := d.b.LockDir(ctx, demoDir)
	if err != nil {
		return err
	}
	d.epochB = l.Epoch()
	d.say("tablet server B (%s) locks %s at epoch %d, newer than A's %d (%s)",
		d.holderB, demoDir, d.epochB, d.epochA, ms(time.Since(start)))
	return nil
}

func (d *demo) readB(ctx context.Context) error {
	start := time.Now()
	r, err := d.b.Open(ctx, demoFile)
	if err != nil {
		return err
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return err
	}
	if len(got) < len(d.data) || !bytes.Equal(got[:len(d.data)], d.data) {
		return fmt.Errorf("tablet server B read %d bytes of %s that are not the %d bytes A synced", len(got), demoFile, len(d.data))
	}
	d.say("B reads %s: %d bytes, all %d bytes A synced are there (%s)", demoFile, len(got), len(d.data), ms(time.Since(start)))
	return nil
}

// fenced shows A, back from the dead, refused everywhere.
func (d *demo) fenced(ctx context.Context) error {
	_, err := d.writerA.Write([]byte("a write from beyond the grave"))
	if err == nil {
		err = d.writerA.Sync(ctx)
	}
	if err == nil {
		return errors.New("tablet server A's write after the unlock was accepted")
	}
	d.say("A tries to write again: refused (%s)", refusal(err))
	err = d.a.Touch(ctx, demoDir+"/late")
	if err == nil {
		return errors.New("tablet server A's create after the unlock was accepted")
	}
	d.say("A tries to create %s/late: refused (%s)", demoDir, refusal(err))
	return nil
}

// refusal says in a word or two why the file system refused an operation.
func refusal(err error) string {
	var le *sdk.LockedError
	switch {
	case errors.Is(err, sdk.ErrSealed):
		return "sealed: " + err.Error()
	case errors.Is(err, sdk.ErrStaleEpoch):
		return "stale epoch: " + err.Error()
	case errors.As(err, &le):
		return "locked: " + err.Error()
	}
	return err.Error()
}
