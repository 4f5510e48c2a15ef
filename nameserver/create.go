package nameserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// createTimeout bounds how long AddBlock waits for the chunkservers of a
// write set to create their replicas.
const createTimeout = 5 * time.Second

// errNoReplica: no chunkserver of a block's write set created its replica.
var errNoReplica = errors.New("no replica could be created")

// errNoSpace: a chunkserver refused a replica for want of disk space
// (RESOURCE_EXHAUSTED); when every chunkserver of a write set did, so
// does AddBlock.
var errNoSpace = errors.New("no space left on the chunkservers")

// createReplicas has every chunkserver in addrs create an empty replica of
// block id, in parallel, and returns once all have answered or ctx (cut
// to createTimeout) ends. A chunkserver that fails is logged and left in
// the write set: the writer drops a replica that refuses its packets. It
// fails only if every create failed.
//
// The caller brackets it with s.creates.begin and s.endCreates, begun
// before the block can be deleted (before the command that gives a file
// the block commits, or before checking that the file still has it):
// deletes of the block wait until the calls have ended, since a
// DeleteBlocks that overtook a CreateBlock would leave a replica no file
// points to, which a late packet could then write.
func (s *term) createReplicas(ctx context.Context, id int64, addrs []string) error {
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { errs[i] = s.createReplica(ctx, addr, id) })
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			glog.Warningf("block %d: create on %s failed, the writer will drop it: %v", id, addrs[i], err)
		}
	}
	if failed == len(addrs) {
		cause := errNoReplica
		if !slices.ContainsFunc(errs, func(err error) bool { return !errors.Is(err, errNoSpace) }) {
			cause = errNoSpace
		}
		return fmt.Errorf("%w: block %d on %v: %w", cause, id, addrs, errors.Join(errs...))
	}
	return nil
}

func (s *term) createReplica(ctx context.Context, addr string, id int64) error {
	cl, err := s.chunkserver(addr)
	if err != nil {
		return err
	}
	resp, err := cl.CreateBlock(ctx, &bfspb.CreateBlockRequest{BlockId: id})
	if err != nil {
		return err
	}
	switch resp.Status {
	case bfspb.StatusCode_OK:
	case bfspb.StatusCode_RESOURCE_EXHAUSTED:
		return fmt.Errorf("%w: %s: %s", errNoSpace, addr, resp.Message)
	default:
		return fmt.Errorf("%v: %s", resp.Status, resp.Message)
	}
	return nil
}

// endCreates ends a round of creates of block id and, once none is left,
// sends the deletes that waited for them.
func (s *term) endCreates(id int64) {
	for _, addr := range s.creates.end(id) {
		s.deleteReplicas(addr, []int64{id})
	}
}

// createTracker counts, per block, the rounds of CreateBlock calls in
// flight, and holds back deletes of those blocks until the last round has
// ended. The zero value is ready to use.
type createTracker struct {
	mu     sync.Mutex
	blocks map[int64]*creating
}

type creating struct {
	rounds int
	// deletes lists the chunkservers whose delete of the block waits.
	deletes []string
}

// begin starts a round of creates of block id.
func (t *createTracker) begin(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blocks == nil {
		t.blocks = make(map[int64]*creating)
	}
	c := t.blocks[id]
	if c == nil {
		c = &creating{}
		t.blocks[id] = c
	}
	c.rounds++
}

// end ends a round of creates of block id; after the last one it returns
// the chunkservers whose delete of the block was held back.
func (t *createTracker) end(id int64) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.blocks[id]
	if c == nil {
		return nil
	}
	if c.rounds--; c.rounds > 0 {
		return nil
	}
	delete(t.blocks, id)
	return c.deletes
}

// hold holds back the delete of block id on the chunkserver at addr if
// creates of the block are in flight, and reports whether it did.
func (t *createTracker) hold(addr string, id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.blocks[id]
	if c == nil {
		return false
	}
	for _, a := range c.deletes {
		if a == addr {
			return true
		}
	}
	c.deletes = append(c.deletes, addr)
	return true
}
