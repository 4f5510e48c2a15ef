package dirlock_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/grpc/metadata"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestTranscripts runs the stories in testdata against a real nameserver
// (its namespace in a temporary directory, the dirlock.Cleaner, the
// fileclose.Closer) and a fleet of fake chunkservers, on a fake clock.
// Each command runs once every goroutine of the test has settled
// (testing/synctest), so what it shows is deterministic. Run with
// -rewrite to regenerate the expected outputs after a deliberate change,
// and review the diff.
//
// The commands (sessions and chunkservers are named; a path names a
// directory or a file):
//
//	chunkservers cs1 cs2 cs3        start and register chunkservers
//	session A [ttl=30s]             open a session whose holder is A
//	gone A                          A stops its keep-alives
//	mkdir PATH                      mkdir -p, by no session
//	lock DIR A [wait]               LockDir for A
//	unlock DIR A [force] [epoch=N] [wait]
//	create FILE A [open] [fence=DIR:EPOCH]
//	                                create (open: for write, with its block)
//	mkdir-as DIR A, rmr DIR A, mv SRC DST A
//	                                mutations by A, to see what a lock allows
//	write FILE N [cs1=M ...]        the writer's bytes land on the replicas
//	sync FILE A N                   the writer's SyncBlock claim
//	finish FILE A                   FinishFile with wait
//	report FILE cs1                 cs1 seals its replica itself and reports it
//	dead cs2 / revive cs2           a chunkserver stops / comes back
//	fail-truncate cs3 / heal cs3    cs3 refuses truncations / takes them again
//	tick 10s                        time passes, one heartbeat interval at a time
//	restart                         the nameserver restarts on its data
//	status DIR, locks, history DIR, stat FILE, replicas FILE
//
// Every command's output ends with the lock transitions it led to, as
// a watcher sees them (sorted by path; in order for each path).
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		dir := t.TempDir()
		synctest.Test(t, func(t *testing.T) {
			c := newCluster(t, dir)
			defer c.close()
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				synctest.Wait()
				out := c.do(t, d)
				synctest.Wait()
				return out + c.events()
			})
		})
	})
}

// callTimeout bounds the calls that may wait (in the bubble's time, which
// jumps to it when nothing else can happen).
const callTimeout = time.Minute

type cluster struct {
	dir      string
	cfg      nameserver.Config
	clock    *clock.Fake
	fleet    *fleet
	ns       *nameserver.Server
	sessions map[string]*session // by name
	names    map[string]string   // session id → name
	watch    *watch
}

type session struct {
	id   string
	gone bool
}

func newCluster(t *testing.T, dir string) *cluster {
	c := &cluster{
		dir: dir, clock: clock.NewFake(time.Unix(1_000_000, 0)), fleet: newFleet(),
		sessions: map[string]*session{}, names: map[string]string{},
	}
	c.cfg = nameserver.DefaultConfig()
	c.cfg.DataDir, c.cfg.MetricsAddr, c.cfg.Clock, c.cfg.Insecure = dir, "", c.clock, true
	c.cfg.TestingKnobs.DialChunkserver = c.fleet.dial
	c.cfg.TestingKnobs.RaftLocal = true
	c.start(t)
	return c
}

// start runs a nameserver on the data directory and watches its locks.
func (c *cluster) start(t *testing.T) {
	ns, err := nameserver.New(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A group of one elects itself after its election timeout (bubble
	// time), then starts its term.
	for !ns.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	c.ns = ns
	c.fleet.mu.Lock()
	c.fleet.ns = ns
	c.fleet.mu.Unlock()
	c.watch = startWatch(t, ns)
}

func (c *cluster) close() {
	c.ns.Close()
	c.watch.wait()
}

func (c *cluster) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

func (c *cluster) do(t *testing.T, d *datadriven.TestData) string {
	args := make([]string, len(d.CmdArgs))
	for i, a := range d.CmdArgs {
		args[i] = a.String()
	}
	ctx, cancel := c.ctx()
	defer cancel()
	switch d.Cmd {
	case "chunkservers":
		for _, a := range args {
			if err := c.fleet.add(a).register(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return "ok"
	case "session":
		return c.openSession(t, ctx, d)
	case "gone":
		c.session(t, args[0]).gone = true
		return "ok"
	case "mkdir":
		r, err := c.ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: args[0], Parents: true})
		return answer(t, err, r.GetStatus(), r.GetMessage(), nil)
	case "mkdir-as":
		r, err := c.ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: args[0], SessionId: c.session(t, args[1]).id})
		return answer(t, err, r.GetStatus(), r.GetMessage(), r.GetConflict())
	case "rmr":
		r, err := c.ns.DeleteDir(ctx, &bfspb.DeleteDirRequest{Path: args[0], Recursive: true, SessionId: c.session(t, args[1]).id})
		return answer(t, err, r.GetStatus(), r.GetMessage(), r.GetConflict())
	case "mv":
		r, err := c.ns.Rename(ctx, &bfspb.RenameRequest{Src: args[0], Dst: args[1], SessionId: c.session(t, args[2]).id})
		return answer(t, err, r.GetStatus(), r.GetMessage(), r.GetConflict())
	case "lock":
		return c.lock(t, ctx, d, args)
	case "unlock":
		return c.unlock(t, ctx, d, args)
	case "create":
		return c.create(t, ctx, d, args)
	case "write":
		return c.write(t, ctx, d, args)
	case "sync":
		n, _ := strconv.ParseInt(args[2], 10, 64)
		r, err := c.ns.SyncBlock(ctx, &bfspb.SyncBlockRequest{
			Path: args[0], SessionId: c.session(t, args[1]).id, BlockId: c.block(t, ctx, args[0]), Size: n})
		return answer(t, err, r.GetStatus(), r.GetMessage(), r.GetConflict())
	case "finish":
		r, err := c.ns.FinishFile(ctx, &bfspb.FinishFileRequest{Path: args[0], SessionId: c.session(t, args[1]).id, Wait: true})
		return answer(t, err, r.GetStatus(), r.GetMessage(), r.GetConflict())
	case "report":
		return c.fleet.get(args[1]).sealBy(c.block(t, ctx, args[0]))
	case "dead":
		c.fleet.mu.Lock()
		c.fleet.servers[args[0]].down = true
		c.fleet.mu.Unlock()
		return "ok"
	case "fail-truncate", "heal":
		c.fleet.mu.Lock()
		c.fleet.servers[args[0]].failTruncate = d.Cmd == "fail-truncate"
		c.fleet.mu.Unlock()
		return "ok"
	case "revive":
		cs := c.fleet.get(args[0])
		c.fleet.mu.Lock()
		cs.down = false
		c.fleet.mu.Unlock()
		if err := cs.register(ctx); err != nil {
			t.Fatal(err)
		}
		return "ok"
	case "tick":
		return c.tick(t, ctx, d, args)
	case "restart":
		c.close()
		seen := c.watch.take()
		c.start(t)
		c.watch.events = seen
		for _, a := range c.fleet.addrs() {
			if cs := c.fleet.get(a); !cs.down {
				if err := cs.register(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		return "ok"
	case "status":
		r, err := c.ns.GetDirLock(ctx, &bfspb.GetDirLockRequest{Path: args[0]})
		if err != nil || r.Status != bfspb.StatusCode_OK {
			return answer(t, err, r.GetStatus(), r.GetMessage(), nil)
		}
		return c.describeLock(r.Lock, true)
	case "locks":
		r, err := c.ns.ListDirLocks(ctx, &bfspb.ListDirLocksRequest{Prefix: "/"})
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range r.Locks {
			lines = append(lines, l.Path+" "+c.describeLock(l, false))
		}
		if len(lines) == 0 {
			return "(none)"
		}
		return strings.Join(lines, "\n")
	case "history":
		return c.history(t, ctx, args[0])
	case "stat":
		return c.stat(t, ctx, args[0])
	case "replicas":
		block := c.block(t, ctx, args[0])
		var lines []string
		for _, a := range c.fleet.addrs() {
			lines = append(lines, a+": "+c.fleet.get(a).describe(block))
		}
		return strings.Join(lines, "\n")
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func (c *cluster) openSession(t *testing.T, ctx context.Context, d *datadriven.TestData) string {
	name := d.CmdArgs[0].Key
	ttl := "30s"
	d.MaybeScanArgs(t, "ttl", &ttl)
	dur, err := time.ParseDuration(ttl)
	if err != nil {
		d.Fatalf(t, "ttl: %v", err)
	}
	r, err := c.ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: name, TtlMs: dur.Milliseconds()})
	if err != nil || r.Status != bfspb.StatusCode_OK {
		d.Fatalf(t, "open session %s: %v %v", name, r.GetStatus(), err)
	}
	c.sessions[name] = &session{id: r.SessionId}
	c.names[r.SessionId] = name
	return "ok"
}

func (c *cluster) session(t *testing.T, name string) *session {
	s, ok := c.sessions[name]
	if !ok {
		t.Fatalf("no session %s", name)
	}
	return s
}

// flag reports whether the command has the bare argument name.
func flag(d *datadriven.TestData, name string) bool {
	for _, a := range d.CmdArgs {
		if a.Key == name && len(a.Vals) == 0 {
			return true
		}
	}
	return false
}

func (c *cluster) lock(t *testing.T, ctx context.Context, d *datadriven.TestData, args []string) string {
	r, err := c.ns.LockDir(ctx, &bfspb.LockDirRequest{Path: args[0], SessionId: c.session(t, args[1]).id, Wait: flag(d, "wait")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status == bfspb.StatusCode_OK {
		return fmt.Sprintf("granted epoch=%d", r.Lock.Epoch)
	}
	return c.refusal(r.Status, r.Lock)
}

func (c *cluster) unlock(t *testing.T, ctx context.Context, d *datadriven.TestData, args []string) string {
	var epoch uint64
	d.MaybeScanArgs(t, "epoch", &epoch)
	r, err := c.ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{
		Path: args[0], SessionId: c.session(t, args[1]).id, Force: flag(d, "force"), Epoch: epoch, Wait: flag(d, "wait"),
	})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case r.Status == bfspb.StatusCode_UNLOCKED && r.Lock.GetEpoch() == 0:
		return "UNLOCKED" // it was already
	case r.Status == bfspb.StatusCode_CLEANING, r.Status == bfspb.StatusCode_UNLOCKED:
		return fmt.Sprintf("%v epoch=%d", r.Status, r.Lock.GetEpoch())
	}
	return c.refusal(r.Status, r.Lock)
}

// refusal describes a lock call that did not do what was asked.
func (c *cluster) refusal(code bfspb.StatusCode, l *bfspb.DirLock) string {
	switch {
	case l == nil:
		return code.String()
	case l.Holder != "":
		return fmt.Sprintf("%v %s by %s epoch=%d", code, l.Path, l.Holder, l.Epoch)
	}
	return fmt.Sprintf("%v %s epoch=%d", code, l.Path, l.Epoch)
}

func (c *cluster) create(t *testing.T, ctx context.Context, d *datadriven.TestData, args []string) string {
	sess := c.session(t, args[1]).id
	var fences []*bfspb.Fence
	if a, ok := d.Arg("fence"); ok {
		dir, epoch, _ := strings.Cut(a.SingleVal(t), ":")
		n, _ := strconv.ParseUint(epoch, 10, 64)
		fences = append(fences, &bfspb.Fence{Path: dir, Epoch: n})
	}
	open := flag(d, "open")
	r, err := c.ns.Create(ctx, &bfspb.CreateRequest{Path: args[0], SessionId: sess, OpenForWrite: open, Fences: fences})
	if err != nil || r.Status != bfspb.StatusCode_OK || !open {
		return answer(t, err, r.GetStatus(), r.GetMessage(), r.GetConflict())
	}
	ab, err := c.ns.AddBlock(ctx, &bfspb.AddBlockRequest{Path: args[0], SessionId: sess, Fences: fences})
	if err != nil || ab.Status != bfspb.StatusCode_OK {
		return answer(t, err, ab.GetStatus(), ab.GetMessage(), ab.GetConflict())
	}
	var on []string
	for _, r := range ab.Block.Replicas {
		on = append(on, r.Address)
	}
	sort.Strings(on)
	return "ok, block on " + strings.Join(on, " ")
}

// answer describes the outcome of a namespace call.
func answer(t *testing.T, err error, code bfspb.StatusCode, msg string, conflict *bfspb.LockConflict) string {
	switch {
	case err != nil:
		t.Fatal(err)
	case code == bfspb.StatusCode_OK:
		return "ok"
	case conflict == nil:
		return fmt.Sprintf("%v: %s", code, msg)
	case conflict.FencedEpoch != 0 && conflict.LockStatus == bfspb.LockStatus_LOCK_STATUS_UNLOCKED:
		return fmt.Sprintf("%v %s fenced at epoch %d, now UNLOCKED", code, conflict.Path, conflict.FencedEpoch)
	case conflict.FencedEpoch != 0:
		return fmt.Sprintf("%v %s fenced at epoch %d, now %v epoch=%d", code, conflict.Path, conflict.FencedEpoch,
			lockState(conflict.LockStatus), conflict.Epoch)
	case conflict.Holder != "":
		return fmt.Sprintf("%v %s by %s epoch=%d", code, conflict.Path, conflict.Holder, conflict.Epoch)
	}
	return fmt.Sprintf("%v %s epoch=%d", code, conflict.Path, conflict.Epoch)
}

func lockState(s bfspb.LockStatus) string {
	return strings.TrimPrefix(s.String(), "LOCK_STATUS_")
}

// block returns the id of the (one) block of file path.
func (c *cluster) block(t *testing.T, ctx context.Context, path string) int64 {
	r, err := c.ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: path})
	if err != nil || r.Status != bfspb.StatusCode_OK || len(r.Blocks) == 0 {
		t.Fatalf("no block for %s: %v %v %v", path, r.GetStatus(), r.GetMessage(), err)
	}
	return r.Blocks[0].BlockId
}

func (c *cluster) write(t *testing.T, ctx context.Context, d *datadriven.TestData, args []string) string {
	block := c.block(t, ctx, args[0])
	n, _ := strconv.ParseInt(args[1], 10, 64)
	var lines []string
	for _, a := range c.fleet.addrs() {
		size := n
		if arg, ok := d.Arg(a); ok {
			size, _ = strconv.ParseInt(arg.SingleVal(t), 10, 64)
		}
		lines = append(lines, a+": "+c.fleet.get(a).write(block, size))
	}
	return strings.Join(lines, "\n")
}

// tick lets time pass one heartbeat interval at a time: the live
// chunkservers heartbeat and the sessions not gone keep alive, then the
// clock moves and everything it wakes settles.
func (c *cluster) tick(t *testing.T, ctx context.Context, d *datadriven.TestData, args []string) string {
	total, err := time.ParseDuration(args[0])
	if err != nil {
		d.Fatalf(t, "tick: %v", err)
	}
	for step := c.cfg.HeartbeatInterval; total > 0; total -= step {
		for _, a := range c.fleet.addrs() {
			if err := c.fleet.get(a).heartbeat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range c.sessions {
			if !s.gone {
				c.ns.KeepAlive(ctx, &bfspb.KeepAliveRequest{SessionId: s.id})
			}
		}
		c.clock.Advance(min(step, total))
		synctest.Wait()
	}
	return "ok"
}

// describeLock says what a lock is; with pending, which files and
// replicas a cleaning still waits for.
func (c *cluster) describeLock(l *bfspb.DirLock, pending bool) string {
	s := lockState(l.Status)
	if l.Status == bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
		return s
	}
	if l.Holder != "" {
		s += " by " + l.Holder
	}
	s += fmt.Sprintf(" epoch=%d", l.Epoch)
	if !pending {
		return s
	}
	for _, p := range l.Pending {
		reps := append([]string(nil), p.PendingReplicas...)
		sort.Strings(reps)
		s += fmt.Sprintf("\npending %s: %s", p.Path, strings.Join(reps, " "))
	}
	return s
}

func (c *cluster) history(t *testing.T, ctx context.Context, path string) string {
	r, err := c.ns.GetLockHistory(ctx, &bfspb.GetLockHistoryRequest{Path: path})
	if err != nil || r.Status != bfspb.StatusCode_OK {
		return answer(t, err, r.GetStatus(), r.GetMessage(), nil)
	}
	if len(r.Entries) == 0 {
		return "(none)"
	}
	var lines []string
	for _, e := range r.Entries {
		holder := e.Holder
		if holder == "" {
			holder = "-"
		}
		lines = append(lines, fmt.Sprintf("epoch=%d holder=%s reason=%s files=%d truncated=%d",
			e.Epoch, holder, e.Reason, e.FilesSealed, e.BytesTruncated))
	}
	return strings.Join(lines, "\n")
}

func (c *cluster) stat(t *testing.T, ctx context.Context, path string) string {
	r, err := c.ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: path})
	if err != nil || r.Status != bfspb.StatusCode_OK {
		return answer(t, err, r.GetStatus(), r.GetMessage(), nil)
	}
	if w := r.Info.WriterSession; w != "" {
		return fmt.Sprintf("open by %s, %d bytes synced", c.names[w], r.Info.Size)
	}
	var on []string
	for _, b := range r.Blocks {
		for _, rep := range b.Replicas {
			on = append(on, rep.Address)
		}
	}
	sort.Strings(on)
	return fmt.Sprintf("closed, %d bytes, read from %s", r.Info.Size, strings.Join(on, " "))
}

// events returns the lock transitions seen since the last call.
func (c *cluster) events() string {
	evs := c.watch.take()
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Lock.Path < evs[j].Lock.Path })
	var b strings.Builder
	for _, ev := range evs {
		holder := ""
		if ev.Lock.Holder != "" {
			holder = " by " + ev.Lock.Holder
		}
		fmt.Fprintf(&b, "\nevent %s: %s -> %s%s epoch=%d (%s)", ev.Lock.Path, lockState(ev.Previous),
			lockState(ev.Lock.Status), holder, ev.Lock.Epoch, ev.Reason)
	}
	return b.String()
}

// watch is a WatchDirLocks stream of everything, kept in memory.
type watch struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	events []*bfspb.DirLockEvent
}

func startWatch(t *testing.T, ns *nameserver.Server) *watch {
	w := &watch{ready: make(chan struct{}), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(w.done)
		ns.WatchDirLocks(&bfspb.WatchDirLocksRequest{Prefix: "/"}, w)
	}()
	select {
	case <-w.ready:
	case <-w.done:
		t.Fatal("the watch ended before it started")
	}
	return w
}

func (w *watch) take() []*bfspb.DirLockEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.events
	w.events = nil
	return evs
}

// wait ends the watch and waits for its stream to return.
func (w *watch) wait() {
	w.cancel()
	<-w.done
}

// The stream the nameserver sends the events on.

func (w *watch) Send(ev *bfspb.DirLockEvent) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, ev)
	return nil
}
func (w *watch) SendHeader(metadata.MD) error { close(w.ready); return nil }
func (w *watch) SetHeader(metadata.MD) error  { return nil }
func (w *watch) SetTrailer(metadata.MD)       {}
func (w *watch) Context() context.Context     { return w.ctx }
func (w *watch) SendMsg(any) error            { return nil }
func (w *watch) RecvMsg(any) error            { return nil }
