package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/nameserver/blockmap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// glog starts its flush daemon in init; it is not ours to stop.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	)
}

// fakes holds a namespace, a block map and chunkservers in memory.
type fakes struct {
	mu      sync.Mutex
	blocks  map[int64]Block
	states  map[int64][]blockmap.ReplicaState
	servers []string
	// copies records the copies asked for, in order, as "block src>tgt".
	copies  []string
	deletes []string
	// answer decides a copy's result; nil means success, and the target
	// then holds a good replica.
	answer func(target, source string, block int64) error
	// gate, if set, holds every copy until it is closed.
	gate chan struct{}
}

func newFakes(servers ...string) *fakes {
	return &fakes{blocks: map[int64]Block{}, states: map[int64][]blockmap.ReplicaState{}, servers: servers}
}

func (f *fakes) put(b Block, states ...blockmap.ReplicaState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocks[b.ID] = b
	f.states[b.ID] = states
}

func good(addr string, size int64) blockmap.ReplicaState {
	return blockmap.ReplicaState{Replica: blockmap.Replica{Addr: addr, Size: size, Sealed: true}}
}

func (f *fakes) Blocks(fn func(Block) error) error {
	f.mu.Lock()
	bs := make([]Block, 0, len(f.blocks))
	for _, b := range f.blocks {
		bs = append(bs, b)
	}
	f.mu.Unlock()
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakes) Block(id int64) (Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blocks[id]
	if !ok {
		return Block{}, fmt.Errorf("block %d: %w", id, ErrGone)
	}
	return b, nil
}

func (f *fakes) States(b blockmap.BlockID) []blockmap.ReplicaState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.states[int64(b)])
}

func (f *fakes) Target(b blockmap.BlockID, exclude []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.servers {
		held := slices.ContainsFunc(f.states[int64(b)], func(r blockmap.ReplicaState) bool { return r.Addr == s })
		if !held && !slices.Contains(exclude, s) {
			return s, nil
		}
	}
	return "", blockmap.ErrNotEnoughServers
}

func (f *fakes) DropReplica(b blockmap.BlockID, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[int64(b)] = slices.DeleteFunc(f.states[int64(b)], func(r blockmap.ReplicaState) bool { return r.Addr == addr })
}

func (f *fakes) Replicate(ctx context.Context, target, source string, block, size int64, _ uint64) error {
	f.mu.Lock()
	f.copies = append(f.copies, fmt.Sprintf("%d %s>%s", block, source, target))
	gate, answer := f.gate, f.answer
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var err error
	if answer != nil {
		err = answer(target, source, block)
	}
	if err == nil {
		f.mu.Lock()
		f.states[block] = append(f.states[block], good(target, size))
		f.mu.Unlock()
	}
	return err
}

func (f *fakes) Delete(addr string, blocks []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range blocks {
		f.deletes = append(f.deletes, fmt.Sprintf("%d %s", b, addr))
	}
}

func (f *fakes) copied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.copies)
}

func (f *fakes) deleted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deletes)
}

func (f *fakes) config() Config {
	return Config{Namespace: f, Replicas: f, Chunkservers: f, Clock: clock.Real{}, Interval: time.Hour}
}

// idle returns a Scheduler whose loop does not run: the test steps it.
func idle(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	s, err := newScheduler(cfg)
	require.NoError(t, err)
	close(s.donec)
	t.Cleanup(s.Close)
	return s
}

// step checks the blocks asked for and starts the copies due.
func (s *Scheduler) step() {
	s.checkDirty()
	s.dispatch()
}

// waitIdle waits for the copies in flight to end.
func waitIdle(t *testing.T, s *Scheduler) {
	t.Helper()
	require.Eventually(t, func() bool { return s.Stats().InFlight == 0 }, 10*time.Second, time.Millisecond)
}

// TestQueueOrder: fewest counting replicas first, then first queued.
func TestQueueOrder(t *testing.T) {
	var q queue
	for i, live := range []int{2, 1, 0, 1, 2, 0} {
		q.put(&entry{block: Block{ID: int64(i)}, live: live, seq: uint64(i), index: -1})
	}
	var got []int64
	for q.Len() > 0 {
		got = append(got, q.pop().block.ID)
	}
	require.Equal(t, []int64{2, 5, 1, 3, 0, 4}, got)
}

// TestPriority: with one copy at a time, the block with the fewest
// counting replicas is always copied next: the one with none left (only a
// corrupt one) first, then it and the one with one left up to two, then
// all three in the order they were queued.
func TestPriority(t *testing.T) {
	f := newFakes("a", "b", "c", "d", "e")
	f.put(Block{ID: 1, Size: 10, Replication: 3}, good("a", 10), good("b", 10))
	f.put(Block{ID: 2, Size: 10, Replication: 3}, good("c", 10))
	corrupt := good("d", 10)
	corrupt.Corrupt = true
	f.put(Block{ID: 3, Size: 10, Replication: 3}, corrupt)
	cfg := f.config()
	cfg.MaxCopies = 1
	s := idle(t, cfg)
	for _, b := range []int64{1, 2, 3} { // queued in this order
		s.Check(b)
		s.checkDirty()
	}
	f.gate = make(chan struct{}) // the first copy stays in flight until the check
	s.dispatch()
	st := s.Stats()
	// Block 3 has no good replica: missing, though a copy from its
	// corrupt one is tried (the report may have been mistaken).
	require.Equal(t, Stats{UnderReplicated: 3, Missing: 1, Queued: 3, InFlight: 1}, st)
	close(f.gate)
	var order []int64
	for range 6 {
		waitIdle(t, s)
		s.step()
	}
	for _, c := range f.copied() {
		var b int64
		fmt.Sscan(c, &b)
		order = append(order, b)
	}
	require.Equal(t, []int64{3, 2, 3, 1, 2, 3}, order, "copies %v", f.copied())
	waitIdle(t, s)
	s.step()
	// Block 3 has three good copies now: its corrupt replica goes.
	require.Contains(t, f.deleted(), "3 d")
	require.Equal(t, Stats{}, s.Stats())
}

// TestOpenFileWaits: a block of a file open for write is counted but not
// copied until the file is closed.
func TestOpenFileWaits(t *testing.T) {
	f := newFakes("a", "b", "c")
	f.put(Block{ID: 1, Size: 5, Replication: 3, Open: true}, good("a", 5))
	s := idle(t, f.config())
	s.Check(1)
	s.step()
	require.Equal(t, Stats{UnderReplicated: 1}, s.Stats())
	require.Empty(t, f.copied())

	f.put(Block{ID: 1, Size: 5, Replication: 3}, good("a", 5))
	s.Check(1) // the close
	s.step()
	waitIdle(t, s)
	require.ElementsMatch(t, []string{"1 a>b", "1 a>c"}, f.copied())
	s.Received(1)
	s.step()
	require.Equal(t, Stats{}, s.Stats())
}

// TestHold: nothing is copied or deleted while Hold says so; all of it
// once it ends.
func TestHold(t *testing.T) {
	f := newFakes("a", "b", "c", "d")
	f.put(Block{ID: 1, Size: 5, Replication: 2}, good("a", 5))
	f.put(Block{ID: 2, Size: 5, Replication: 1}, good("a", 5), good("b", 5))
	f.put(Block{ID: 3, Size: 5, Replication: 0}, good("a", 5), good("b", 5)) // bad record: left alone
	var held atomic.Bool
	var holds atomic.Int64
	held.Store(true)
	cfg := f.config()
	cfg.Interval = 20 * time.Millisecond
	cfg.Hold = func() bool { holds.Add(1); return held.Load() }
	s, err := New(cfg)
	require.NoError(t, err)
	defer s.Close()
	s.Check(1, 2)
	// Many passes of the loop, all held.
	n := holds.Load()
	require.Eventually(t, func() bool { return holds.Load() > n+5 }, 10*time.Second, time.Millisecond)
	require.Empty(t, f.copied())
	require.Empty(t, f.deleted())

	held.Store(false)
	require.Eventually(t, func() bool { return len(f.copied()) == 1 && len(f.deleted()) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"1 a>b"}, f.copied())
	require.Equal(t, []string{"2 b"}, f.deleted())
}

// TestFailuresSteer: a busy target is skipped, a source that lost its
// replica is avoided, and other failures back off and retry.
func TestFailuresSteer(t *testing.T) {
	f := newFakes("b", "c", "d")
	f.put(Block{ID: 1, Size: 5, Replication: 3}, good("a", 5), good("x", 5))
	var calls atomic.Int64
	f.answer = func(target, source string, _ int64) error {
		switch {
		case target == "b":
			return ErrBusy
		case source == "a":
			return ErrSourceNotFound
		case calls.Add(1) == 1:
			return errors.New("connection reset")
		}
		return nil
	}
	cfg := f.config()
	cfg.MaxCopiesPerServer = 1
	s := idle(t, cfg)
	s.Check(1)
	require.Eventually(t, func() bool {
		s.step()
		return s.Stats().UnderReplicated == 0 && s.Stats().InFlight == 0
	}, 10*time.Second, 5*time.Millisecond)
	// a>b: busy, so b is left alone; a>c: a lost its replica, so a is
	// avoided; x>c: a failure, retried after a backoff.
	require.Equal(t, []string{"1 a>b", "1 a>c", "1 x>c", "1 x>c"}, f.copied())
}

// TestAssess: what a closed block's replicas call for, by the one
// definition of a good replica (sealed at the block's length, not known
// corrupt; a failed volume's are not in the map at all).
func TestAssess(t *testing.T) {
	b := Block{ID: 1, Size: 10, Replication: 2}
	bad := good("c", 10)
	bad.Corrupt = true
	drain := good("d", 10)
	drain.Draining = true
	short := good("e", 4)
	unsealed := good("u", 10)
	unsealed.Sealed = false
	for _, tc := range []struct {
		name   string
		states []blockmap.ReplicaState
		want   verdict
	}{
		{"none", nil, verdict{}},
		{"short of one", []blockmap.ReplicaState{good("a", 10), bad}, verdict{counting: 1, good: 1, source: true}},
		{"full: the corrupt one goes", []blockmap.ReplicaState{good("a", 10), good("b", 10), bad},
			verdict{counting: 2, good: 2, source: true, drop: []string{"c"}}},
		{"draining never counts nor is trimmed", []blockmap.ReplicaState{good("a", 10), drain}, verdict{counting: 1, good: 2, source: true}},
		{"excess", []blockmap.ReplicaState{good("a", 10), good("b", 10), good("f", 10), drain},
			verdict{counting: 3, good: 4, source: true, trim: []string{"f"}}},
		{"a short replica is no full copy and does not count", []blockmap.ReplicaState{good("a", 10), short, bad},
			verdict{counting: 1, good: 1, source: true}},
		{"full: short and unsealed ones go", []blockmap.ReplicaState{good("a", 10), good("b", 10), short, unsealed},
			verdict{counting: 2, good: 2, source: true, drop: []string{"e", "u"}}},
		{"every replica corrupt: missing, a copy may still be tried", []blockmap.ReplicaState{bad}, verdict{source: true}},
		{"only short and unsealed ones: missing, nothing to copy", []blockmap.ReplicaState{short, unsealed}, verdict{}},
	} {
		v := assess(b, tc.states)
		require.Equal(t, tc.want, v, tc.name)
		require.Equal(t, tc.want.good == 0, v.missing(), tc.name)
	}
}

// TestMissingHasNoGoodReplica: a block whose replicas are all corrupt or
// short is missing for the metrics, though it has replicas (it used to
// count only when none at all was known); one with a good replica is not.
func TestMissingHasNoGoodReplica(t *testing.T) {
	f := newFakes("a", "b", "c", "d")
	bad := good("a", 10)
	bad.Corrupt = true
	f.put(Block{ID: 1, Size: 10, Replication: 3}, bad, good("b", 4))
	f.put(Block{ID: 2, Size: 10, Replication: 3}, good("c", 10), good("d", 4))
	s := idle(t, f.config())
	s.Check(1, 2)
	s.checkDirty() // no copy started: the counts before any
	st := s.Stats()
	require.Equal(t, 1, st.Missing)
	require.Equal(t, 2, st.UnderReplicated)
}

// TestConfig: bad input is an error.
func TestConfig(t *testing.T) {
	_, err := New(Config{})
	require.Error(t, err)
	f := newFakes()
	cfg := f.config()
	cfg.MaxCopies = -1
	_, err = New(cfg)
	require.ErrorContains(t, err, "negative")
}

// TestSourceChoice: a copy comes from a counting replica if there is one,
// else from a draining one, and from a corrupt one only as a last hope;
// never from a replica that is not a full sealed copy.
func TestSourceChoice(t *testing.T) {
	b := Block{ID: 1, Size: 10, Replication: 3}
	bad := good("c", 10)
	bad.Corrupt = true
	drain := good("d", 10)
	drain.Draining = true
	unsealed := good("u", 10)
	unsealed.Sealed = false
	for _, tc := range []struct {
		states []blockmap.ReplicaState
		want   string
	}{
		{[]blockmap.ReplicaState{bad, drain, good("g", 10)}, "g"},
		{[]blockmap.ReplicaState{bad, drain}, "d"},
		{[]blockmap.ReplicaState{bad, unsealed, good("s", 4)}, "c"},
		{[]blockmap.ReplicaState{unsealed, good("s", 4)}, ""},
	} {
		s := idle(t, newFakes().config())
		e := newEntry(b, 1)
		e.states = tc.states
		s.mu.Lock()
		got := s.sourceLocked(e)
		s.mu.Unlock()
		require.Equal(t, tc.want, got, "%+v", tc.states)
	}
}
