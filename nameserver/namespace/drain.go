package namespace

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// applyDrain records chunkservers as draining (decommissioned), or no
// longer so.
func applyDrain(st *step, c *bfspb.DrainCmd) (*Result, error) {
	for _, addr := range c.Addresses {
		if addr == "" {
			return nil, fmt.Errorf("%w: drain of an empty chunkserver address", ErrInvalid)
		}
	}
	for _, addr := range c.Addresses {
		var err error
		if c.Cancel {
			err = st.b.Delete(drainKey(addr), nil)
		} else {
			err = st.b.Set(drainKey(addr), nil, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	return &Result{}, nil
}

// Draining returns the addresses of the chunkservers recorded as
// draining (DrainCmd), sorted.
func (s *Store) Draining() ([]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	upper := append([]byte(nil), keyDrain...)
	upper[len(upper)-1]++
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: keyDrain, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, string(it.Key()[len(keyDrain):]))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	return out, it.Close()
}
