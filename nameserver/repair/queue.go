package repair

import (
	"container/heap"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/bfs-go/bfs/nameserver/blockmap"
)

// entry is an under-replicated block the Scheduler tracks: queued for a
// copy, waiting for its file to close, or with copies in flight.
type entry struct {
	block Block
	// states are the block's replicas when it was last checked; sources
	// are chosen from them.
	states []blockmap.ReplicaState
	// live counts the replicas that count toward the replication (and the
	// copies that completed but are not in the map yet): the priority,
	// fewest first.
	live int
	// seq orders entries of equal priority: first queued, first served.
	seq uint64
	// index is the entry's place in the queue, -1 when not queued.
	index int
	// copies maps each copy in flight to its source, by target.
	copies map[string]string
	// expect holds the targets whose copy succeeded and that the map does
	// not show yet (their BlockReceived is on its way), until when.
	expect map[string]time.Time
	// avoid holds chunkservers that failed a copy of this block (a source
	// without a good replica, a target that has one), until when.
	avoid map[string]time.Time
	// notBefore holds the block back after a failed copy.
	notBefore time.Time
	backoff   *backoff.ExponentialBackOff
}

func newEntry(b Block, seq uint64) *entry {
	return &entry{block: b, seq: seq, index: -1, copies: map[string]string{},
		expect: map[string]time.Time{}, avoid: map[string]time.Time{}}
}

// need is how many more copies the block wants beyond those in flight.
func (e *entry) need() int { return e.block.Replication - e.live - len(e.copies) }

// queue orders entries by fewest counting replicas, then by when they
// were queued. It is a container/heap.
type queue []*entry

func (q queue) Len() int { return len(q) }

func (q queue) Less(i, j int) bool {
	if q[i].live != q[j].live {
		return q[i].live < q[j].live
	}
	return q[i].seq < q[j].seq
}

func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *queue) Push(x any) {
	e := x.(*entry)
	e.index = len(*q)
	*q = append(*q, e)
}

func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.index = -1
	return e
}

// put queues e, or moves it to its place if queued already.
func (q *queue) put(e *entry) {
	if e.index >= 0 {
		heap.Fix(q, e.index)
		return
	}
	heap.Push(q, e)
}

// remove takes e out of the queue if it is in it.
func (q *queue) remove(e *entry) {
	if e.index >= 0 {
		heap.Remove(q, e.index)
	}
}

// pop takes the entry first in order.
func (q *queue) pop() *entry { return heap.Pop(q).(*entry) }
