package namespace

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// applyChunkserver records what the nameserver remembers of a
// chunkserver (a registration, a death), or forgets it.
func applyChunkserver(st *step, c *bfspb.ChunkserverCmd) (*Result, error) {
	if c.Address == "" {
		return nil, fmt.Errorf("%w: chunkserver record of an empty address", ErrInvalid)
	}
	if c.Forget {
		return &Result{}, st.b.Delete(chunkserverKey(c.Address), nil)
	}
	if c.Record == nil {
		return nil, fmt.Errorf("%w: chunkserver record of %s without a record", ErrInvalid, c.Address)
	}
	v, err := proto.Marshal(c.Record)
	if err != nil {
		return nil, err
	}
	return &Result{}, st.b.Set(chunkserverKey(c.Address), v, nil)
}

// Chunkservers returns the chunkservers recorded (ChunkserverCmd), by
// address.
func (s *Store) Chunkservers() (map[string]*bfspb.ChunkserverRecord, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	upper := append([]byte(nil), keyChunkserver...)
	upper[len(upper)-1]++
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: keyChunkserver, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	out := make(map[string]*bfspb.ChunkserverRecord)
	for it.First(); it.Valid(); it.Next() {
		rec := &bfspb.ChunkserverRecord{}
		if err := proto.Unmarshal(it.Value(), rec); err != nil {
			it.Close()
			return nil, fmt.Errorf("namespace: chunkserver record %q: %w", it.Key()[len(keyChunkserver):], err)
		}
		out[string(it.Key()[len(keyChunkserver):])] = rec
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	return out, it.Close()
}
