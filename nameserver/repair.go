package nameserver

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// repairQueue holds the blocks written with fewer replicas than their
// file's replication (degraded writes). The repair scheduler, not built
// yet, is to drain it once each block's file is closed; until then it
// only counts them, for the gauge bfs_nameserver_under_replicated_blocks.
// It is in memory only: after a restart the block reports are what show a
// block short of replicas.
type repairQueue struct {
	mu struct {
		sync.Mutex
		blocks map[int64]struct{}
	}
}

func newRepairQueue() *repairQueue {
	q := &repairQueue{}
	q.mu.blocks = make(map[int64]struct{})
	return q
}

// add queues block for repair.
func (q *repairQueue) add(block int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.blocks[block] = struct{}{}
}

// forget drops blocks whose files are gone.
func (q *repairQueue) forget(blocks ...int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range blocks {
		delete(q.mu.blocks, b)
	}
}

// len is how many blocks wait for repair.
func (q *repairQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.mu.blocks)
}

func (q *repairQueue) collectors() []prometheus.Collector {
	return []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bfs_nameserver_under_replicated_blocks",
		Help: "Blocks written with fewer replicas than their file's replication, waiting for repair.",
	}, func() float64 { return float64(q.len()) })}
}
