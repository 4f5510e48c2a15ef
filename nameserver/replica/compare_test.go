package replica

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestCompareInmem runs the same random sequence of operations on the
// store (bare, and in raft.LogCache) and on raft.InmemStore, and requires
// the same answer to every call, with reopens of the store in between.
//
// The operations are those raft makes, and those the LogStore contract
// allows that InmemStore answers exactly: appends (with gaps), overwrites,
// truncations of the tail, compactions of the head, deletes in the middle
// and of everything. Two it answers otherwise are left to TestConformance
// ("below first", "delete to a gap"): InmemStore moves a bound to the end
// of a deleted range even when no entry is stored there, and never lowers
// FirstIndex.
func TestCompareInmem(t *testing.T) {
	for _, cached := range []bool{false, true} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("cached=%v/seed=%d", cached, seed), func(t *testing.T) {
				c := &comparison{t: t, rng: rand.New(rand.NewPCG(seed, seed)), dir: t.TempDir(),
					cached: cached, ref: raft.NewInmemStore(), stored: map[uint64]bool{}}
				c.open()
				defer func() { require.NoError(t, c.store.Close()) }()
				for step := range 500 {
					c.step = step
					c.randomOp()
					c.compareBounds()
				}
				_, last := c.bounds()
				for i := uint64(0); i <= last+2; i++ {
					c.compareGet(i)
				}
				t.Logf("%d operations, %d reopens, up to %d entries stored", c.ops, c.reopens, c.longest)
			})
		}
	}
}

type comparison struct {
	t      *testing.T
	rng    *rand.Rand
	dir    string
	cached bool
	step   int

	ref   *raft.InmemStore
	store *LogStore
	logs  raft.LogStore // store, or a LogCache around it

	// stored is the set of stored indexes, to pick the operations' ranges.
	stored  map[uint64]bool
	longest int // the most entries stored at once
	term    uint64
	ops     int
	reopens int
}

func (c *comparison) open() {
	s, err := OpenLogStore(testOptions(c.t, c.dir))
	require.NoError(c.t, err)
	c.store, c.logs = s, s
	if c.cached {
		c.logs, err = raft.NewLogCache(4, s)
		require.NoError(c.t, err)
	}
}

// bounds returns the reference's bounds.
func (c *comparison) bounds() (first, last uint64) {
	first, _ = c.ref.FirstIndex()
	last, _ = c.ref.LastIndex()
	return first, last
}

func (c *comparison) randomOp() {
	c.ops++
	first, last := c.bounds()
	switch r := c.rng.IntN(100); {
	case r < 34:
		start := last + 1
		if last == 0 {
			start = 1 + c.rng.Uint64N(50)
		} else if c.rng.IntN(5) == 0 {
			start += 1 + c.rng.Uint64N(10) // a gap
		}
		c.storeLogs(start, 1+c.rng.Uint64N(20))
	case r < 38 && last > 0:
		c.storeLogs(first+c.rng.Uint64N(last-first+1), 1+c.rng.Uint64N(10))
	case r < 44 && last > 0:
		// A follower's conflict: truncate from an entry, store anew.
		from := c.pick(first, last)
		c.deleteRange(from, last)
		c.storeLogs(from, 1+c.rng.Uint64N(10))
	case r < 48 && last > 0:
		// Compaction of the head up to just before a stored entry.
		c.deleteRange(first, c.pick(first, last)-1)
	case r < 52 && last > first+2:
		lo := first + 1 + c.rng.Uint64N(last-first-1)
		c.deleteRange(lo, lo+c.rng.Uint64N(last-lo))
	case r < 53 && last > 0: // (InmemStore takes DeleteRange(0, 0) for a last index of 2^64-1)
		c.deleteRange(first, last)
	case r < 80:
		c.compareGet(c.rng.Uint64N(last + 5))
	case r < 95:
		c.stableOp()
	default:
		require.NoError(c.t, c.store.Close())
		c.open()
		c.reopens++
	}
}

// pick returns a stored index in lo..hi, or lo when none is found quickly.
func (c *comparison) pick(lo, hi uint64) uint64 {
	for range 20 {
		if i := lo + c.rng.Uint64N(hi-lo+1); c.stored[i] {
			return i
		}
	}
	return lo
}

func (c *comparison) storeLogs(start, n uint64) {
	c.term++
	var mine, theirs []*raft.Log
	for i := start; i < start+n; i++ {
		l := c.randomLog(i)
		copied := *l
		mine, theirs = append(mine, l), append(theirs, &copied)
		c.stored[i] = true
	}
	c.longest = max(c.longest, len(c.stored))
	require.NoError(c.t, c.ref.StoreLogs(theirs))
	require.NoError(c.t, c.logs.StoreLogs(mine), "step %d: StoreLogs(%d..%d)", c.step, start, start+n-1)
}

func (c *comparison) randomLog(index uint64) *raft.Log {
	l := &raft.Log{Index: index, Term: c.term, Type: raft.LogType(c.rng.IntN(7))}
	if n := c.rng.IntN(40); n > 0 {
		l.Data = make([]byte, n)
		for i := range l.Data {
			l.Data[i] = byte(c.rng.Uint32())
		}
	}
	if c.rng.IntN(2) == 0 {
		l.Extensions = []byte{byte(c.rng.Uint32())}
	}
	if c.rng.IntN(4) != 0 {
		l.AppendedAt = time.Unix(c.rng.Int64N(4e9), c.rng.Int64N(1e9))
	}
	return l
}

func (c *comparison) deleteRange(lo, hi uint64) {
	for i := lo; i <= hi && i >= lo; i++ {
		delete(c.stored, i)
	}
	require.NoError(c.t, c.ref.DeleteRange(lo, hi))
	require.NoError(c.t, c.logs.DeleteRange(lo, hi), "step %d: DeleteRange(%d, %d)", c.step, lo, hi)
}

func (c *comparison) compareBounds() {
	wantFirst, wantLast := c.bounds()
	first, err := c.logs.FirstIndex()
	require.NoError(c.t, err)
	last, err := c.logs.LastIndex()
	require.NoError(c.t, err)
	require.Equal(c.t, [2]uint64{wantFirst, wantLast}, [2]uint64{first, last}, "step %d: bounds", c.step)
}

func (c *comparison) compareGet(i uint64) {
	var want, got raft.Log
	wantErr := c.ref.GetLog(i, &want)
	err := c.logs.GetLog(i, &got)
	require.Equal(c.t, wantErr, err, "step %d: GetLog(%d)", c.step, i)
	if err == nil {
		require.Empty(c.t, sameLog(&want, &got), "step %d", c.step)
	}
}

// stableOp sets or gets a stable value. Byte values and uint64 values
// use keys of their own: InmemStore keeps them apart.
func (c *comparison) stableOp() {
	key := []byte{'a' + byte(c.rng.IntN(4))}
	ukey := []byte{'x' + byte(c.rng.IntN(3))}
	switch c.rng.IntN(4) {
	case 0:
		if key[0] == 'd' {
			return // a key never set
		}
		val := make([]byte, c.rng.IntN(8)) // never nil: InmemStore takes nil for missing
		for i := range val {
			val[i] = byte(c.rng.Uint32())
		}
		require.NoError(c.t, c.ref.Set(key, val))
		require.NoError(c.t, c.store.Set(key, val))
	case 1:
		want, wantErr := c.ref.Get(key)
		got, err := c.store.Get(key)
		require.Equal(c.t, wantErr == nil, err == nil, "step %d: Get(%s): %v, want %v", c.step, key, err, wantErr)
		if err != nil {
			require.Equal(c.t, wantErr.Error(), err.Error())
		}
		require.True(c.t, bytes.Equal(want, got), "step %d: Get(%s) = %x, want %x", c.step, key, got, want)
	case 2:
		if ukey[0] == 'z' {
			return
		}
		v := c.rng.Uint64()
		require.NoError(c.t, c.ref.SetUint64(ukey, v))
		require.NoError(c.t, c.store.SetUint64(ukey, v))
	case 3:
		want, wantErr := c.ref.GetUint64(ukey)
		got, err := c.store.GetUint64(ukey)
		require.Equal(c.t, wantErr, err)
		require.Equal(c.t, want, got, "step %d: GetUint64(%s)", c.step, ukey)
	}
}
