package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/faultnet"
	"github.com/bfs-go/bfs/sdk"
)

// lockInput is a call of the lock service: LockDir (unlock false) or
// UnlockDir at epoch, by client, on dir.
type lockInput struct {
	client int
	dir    string
	unlock bool
	epoch  uint64
}

// lockOutput is its answer. Unknown calls (the outcome was not learnt:
// UNAVAILABLE, a transport failure) have a nil output and return at the
// end of time, as porcupine takes them.
type lockOutput struct {
	kind lockAnswer
	// epoch is the epoch granted (granted) or of the lock in the way
	// (locked); holder the client holding it (locked).
	epoch  uint64
	holder int
}

type lockAnswer int

const (
	granted  lockAnswer = iota // LockDir: OK
	locked                     // LockDir or UnlockDir: LOCKED by another
	released                   // UnlockDir: UNLOCKED (by this call, or already)
	stale                      // UnlockDir: STALE_EPOCH
)

// lockState is one directory's lock in the model: its holder (-1: none)
// and epoch (0 while unknown: a grant whose answer was lost), and the
// newest epoch granted on it.
type lockState struct {
	holder      int
	epoch, last uint64
}

// lockModel is the sequential specification of a directory lock (SPEC
// §6) without files to clean: LockDir grants an UNLOCKED directory with
// an epoch above every epoch granted before, grants a lock the session
// holds again at the same epoch, and refuses (LOCKED, naming the holder
// and epoch) a lock another session holds; UnlockDir at the lock's epoch
// by its holder releases it, answers UNLOCKED for a directory that is
// unlocked, and STALE_EPOCH when the lock has another epoch.
var lockModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byDir := map[string][]porcupine.Operation{}
		var dirs []string
		for _, op := range history {
			d := op.Input.(lockInput).dir
			if _, ok := byDir[d]; !ok {
				dirs = append(dirs, d)
			}
			byDir[d] = append(byDir[d], op)
		}
		out := make([][]porcupine.Operation, 0, len(dirs))
		for _, d := range dirs {
			out = append(out, byDir[d])
		}
		return out
	},
	Init: func() any { return lockState{holder: -1} },
	Step: func(state, input, output any) (bool, any) {
		st, in := state.(lockState), input.(lockInput)
		out, _ := output.(*lockOutput)
		if in.unlock {
			return stepUnlock(st, in, out)
		}
		return stepLock(st, in, out)
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lockInput)
		out, _ := output.(*lockOutput)
		call := fmt.Sprintf("lock(%d, %s)", in.client, in.dir)
		if in.unlock {
			call = fmt.Sprintf("unlock(%d, %s, %d)", in.client, in.dir, in.epoch)
		}
		if out == nil {
			return call + " -> ?"
		}
		return fmt.Sprintf("%s -> %d epoch %d holder %d", call, out.kind, out.epoch, out.holder)
	},
}

func stepLock(st lockState, in lockInput, out *lockOutput) (bool, lockState) {
	mine := st.holder == in.client
	switch {
	case out == nil: // unknown: granted if it could be
		if st.holder < 0 {
			return true, lockState{holder: in.client, last: st.last}
		}
		return true, st
	case out.kind == granted:
		fresh := out.epoch > st.last
		ok := st.holder < 0 && fresh || mine && (st.epoch == out.epoch || st.epoch == 0 && fresh)
		return ok, lockState{holder: in.client, epoch: out.epoch, last: max(st.last, out.epoch)}
	case out.kind == locked:
		ok := st.holder >= 0 && !mine && st.holder == out.holder &&
			(st.epoch == out.epoch || st.epoch == 0 && out.epoch > st.last)
		return ok, lockState{holder: st.holder, epoch: out.epoch, last: max(st.last, out.epoch)}
	}
	return false, st
}

func stepUnlock(st lockState, in lockInput, out *lockOutput) (bool, lockState) {
	mine := st.holder == in.client && (st.epoch == in.epoch || st.epoch == 0)
	free := lockState{holder: -1, last: max(st.last, in.epoch)}
	switch {
	case out == nil:
		if mine {
			return true, free
		}
		return true, st
	case out.kind == released:
		return st.holder < 0 || mine, free
	case out.kind == stale:
		return st.holder >= 0 && st.epoch != in.epoch, st
	case out.kind == locked:
		return st.holder >= 0 && st.holder != in.client, st
	}
	return false, st
}

// lockHistory records the operations of the clients.
type lockHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	// unknown counts the operations of unknown outcome.
	unknown int
}

func (h *lockHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *lockHistory) add(in lockInput, call int64, out *lockOutput) {
	ret := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if out == nil {
		ret = math.MaxInt64
		h.unknown++
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: in.client, Input: in, Call: call, Output: out, Return: ret})
}

// linClient is one of the clients: it locks a directory at random,
// unlocks it at the epoch granted, and so on until stopped. A call whose
// outcome it did not learn is asked again (LockDir of the same session
// and UnlockDir at the same epoch may be repeated) until it does, as a
// tablet server would.
type linClient struct {
	t     *testing.T
	id    int
	c     *sdk.Client
	h     *lockHistory
	dirs  []string
	rng   *rand.Rand
	names map[string]int
}

func (lc *linClient) run(stopc <-chan struct{}) {
	for {
		select {
		case <-stopc:
			return
		default:
		}
		dir := lc.dirs[lc.rng.IntN(len(lc.dirs))]
		var out *lockOutput
		for out == nil {
			out = lc.lock(dir)
		}
		if out.kind != granted {
			continue
		}
		for done := false; !done; {
			done = lc.unlock(dir, out.epoch) != nil
		}
	}
}

func (lc *linClient) lock(dir string) *lockOutput {
	in := lockInput{client: lc.id, dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := lc.h.now()
	l, err := lc.c.LockDir(ctx, dir)
	var out *lockOutput
	var le *sdk.LockedError
	switch {
	case err == nil:
		out = &lockOutput{kind: granted, epoch: l.Epoch()}
	case errors.As(err, &le) && errors.Is(err, sdk.ErrLocked):
		holder, ok := lc.names[le.Holder]
		if !ok {
			lc.t.Errorf("client %d: %s locked by %q, none of the clients", lc.id, dir, le.Holder)
		}
		out = &lockOutput{kind: locked, epoch: le.Epoch, holder: holder}
	default:
		lc.unknown(err)
	}
	lc.h.add(in, call, out)
	return out
}

func (lc *linClient) unlock(dir string, epoch uint64) *lockOutput {
	in := lockInput{client: lc.id, dir: dir, unlock: true, epoch: epoch}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := lc.h.now()
	d, err := lc.c.UnlockDir(ctx, dir, sdk.AtEpoch(epoch))
	var out *lockOutput
	var le *sdk.LockedError
	switch {
	case err == nil && d.Status == sdk.Unlocked:
		out = &lockOutput{kind: released}
	case err == nil:
		lc.t.Errorf("client %d: unlock %s at epoch %d left it %v", lc.id, dir, epoch, d.Status)
	case errors.Is(err, sdk.ErrStaleEpoch):
		out = &lockOutput{kind: stale}
	case errors.As(err, &le) && errors.Is(err, sdk.ErrLocked):
		out = &lockOutput{kind: locked, epoch: le.Epoch, holder: lc.names[le.Holder]}
	default:
		lc.unknown(err)
	}
	lc.h.add(in, call, out)
	return out
}

// unknown accepts only the errors of a call whose outcome is unknown: a
// session lost (it would take the client's locks with it, which the
// model does not do) fails the test.
func (lc *linClient) unknown(err error) {
	if errors.Is(err, sdk.ErrSessionExpired) || errors.Is(err, sdk.ErrClosed) {
		lc.t.Errorf("client %d: %v", lc.id, err)
	}
}

// TestGroupLockHistoryIsLinearizable: 50 clients lock and unlock five
// directories while the group's leader is killed with SIGKILL and
// restarted, or cut off from its peers (its Raft links black-holed)
// while every client still reaches it, 6 faults in turn
// ($BFS_HA_TRIALS caps them). Every call and return is recorded, calls
// whose outcome was not learnt included, and the history must be
// linearizable against the model of the lock service (porcupine).
func TestGroupLockHistoryIsLinearizable(t *testing.T) {
	g := startGroup(t, 0)
	faults := trials(t, 6)
	const clients, dirs = 50, 5
	var dirNames []string
	setup := g.client(sdk.WithHolder("setup"))
	for d := range dirs {
		dirNames = append(dirNames, fmt.Sprintf("/lin/d%d", d))
		require.NoError(t, setup.MkdirAll(ctxT(t, time.Minute), dirNames[d], 0))
	}
	names := map[string]int{}
	for k := range clients {
		names[fmt.Sprintf("lin-%d", k)] = k
	}
	h := &lockHistory{start: time.Now()}
	stopc := make(chan struct{})
	var wg sync.WaitGroup
	for k := range clients {
		lc := &linClient{t: t, id: k, h: h, dirs: dirNames, names: names, rng: rand.New(rand.NewPCG(uint64(k), 1)),
			c: g.client(sdk.WithHolder(fmt.Sprintf("lin-%d", k)), sdk.WithSessionTTL(30*time.Second))}
		wg.Go(func() { lc.run(stopc) })
	}
	opsNow := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.ops)
	}
	waitOps := func(n int) {
		target := opsNow() + n
		waitFor(t, 2*time.Minute, fmt.Sprintf("%d more operations", n), func() bool { return opsNow() >= target })
	}
	waitOps(200)
	for f := range faults {
		old := g.waitLeader(-1)
		if f%2 == 0 {
			g.kill(old)
			next := g.waitLeader(old)
			waitOps(200)
			t.Logf("fault %d: killed leader %s; %s leads; %d operations so far", f, g.names[old], g.names[next], opsNow())
			g.restart(old)
		} else {
			g.net.Isolate(g.names[old], faultnet.Fault{Blackhole: true})
			next := g.waitLeader(old)
			waitOps(200)
			t.Logf("fault %d: cut leader %s off from its peers; %s leads; %d operations so far", f, g.names[old], g.names[next], opsNow())
			g.net.HealAll()
		}
		g.waitFollowing(old)
		waitOps(100)
	}
	close(stopc)
	wg.Wait()

	h.mu.Lock()
	ops, unknown := h.ops, h.unknown
	h.mu.Unlock()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(lockModel, ops, 5*time.Minute)
	t.Logf("porcupine checked %d operations (%d of unknown outcome) from %d clients on %d directories through %d faults in %v: %v",
		len(ops), unknown, clients, dirs, faults, time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Ok {
		file := t.TempDir() + "/history.html"
		if err := porcupine.VisualizePath(lockModel, info, file); err == nil {
			t.Logf("the history, drawn: %s", file)
		}
		t.Fatalf("the lock history is not linearizable: %v", res)
	}
}

// TestLockModel holds the model to what it must refuse and accept, so
// that an Ok above means something.
func TestLockModel(t *testing.T) {
	lock := func(c int) lockInput { return lockInput{client: c, dir: "/d"} }
	unlock := func(c int, e uint64) lockInput { return lockInput{client: c, dir: "/d", unlock: true, epoch: e} }
	op := func(in lockInput, call, ret int64, out *lockOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: in.client, Input: in, Call: call, Output: out, Return: ret}
	}
	for _, tc := range []struct {
		name string
		ok   bool
		ops  []porcupine.Operation
	}{
		{"grant, release, grant", true, []porcupine.Operation{
			op(lock(0), 0, 1, &lockOutput{kind: granted, epoch: 1}),
			op(unlock(0, 1), 2, 3, &lockOutput{kind: released}),
			op(lock(1), 4, 5, &lockOutput{kind: granted, epoch: 2}),
		}},
		{"two holders", false, []porcupine.Operation{
			op(lock(0), 0, 1, &lockOutput{kind: granted, epoch: 1}),
			op(lock(1), 2, 3, &lockOutput{kind: granted, epoch: 2}),
		}},
		{"an epoch reused", false, []porcupine.Operation{
			op(lock(0), 0, 1, &lockOutput{kind: granted, epoch: 5}),
			op(unlock(0, 5), 2, 3, &lockOutput{kind: released}),
			op(lock(1), 4, 5, &lockOutput{kind: granted, epoch: 5}),
		}},
		{"refused while free", false, []porcupine.Operation{
			op(lock(0), 0, 1, &lockOutput{kind: granted, epoch: 1}),
			op(unlock(0, 1), 2, 3, &lockOutput{kind: released}),
			op(lock(1), 4, 5, &lockOutput{kind: locked, epoch: 1, holder: 0}),
		}},
		{"a grant of unknown outcome that took effect", true, []porcupine.Operation{
			op(lock(0), 0, math.MaxInt64, nil),
			op(lock(1), 2, 3, &lockOutput{kind: locked, epoch: 7, holder: 0}),
			op(lock(0), 4, 5, &lockOutput{kind: granted, epoch: 7}),
		}},
		{"a grant of unknown outcome that did not", true, []porcupine.Operation{
			op(lock(0), 0, math.MaxInt64, nil),
			op(lock(1), 2, 3, &lockOutput{kind: granted, epoch: 1}),
		}},
		{"released at another epoch", false, []porcupine.Operation{
			op(lock(0), 0, 1, &lockOutput{kind: granted, epoch: 1}),
			op(unlock(0, 9), 2, 3, &lockOutput{kind: released}),
		}},
	} {
		if got := porcupine.CheckOperations(lockModel, tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, got, tc.ok)
		}
	}
}
