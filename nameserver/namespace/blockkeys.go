package namespace

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// KeepBlockKeys is how many block-token keys the store keeps: the one the
// leader signs with and the one before it, whose tokens may not have
// expired yet. A BlockKeyCmd drops the older ones in its own batch.
const KeepBlockKeys = 2

// keyBlockKey, followed by a key id (8 bytes, big-endian), holds a
// BlockKey.
var keyBlockKey = []byte{prefixSystem, 'b', 'k', 'e', 'y', 0}

func blockKeyKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(slices.Clip(keyBlockKey), id)
}

func blockKeyBounds() (lower, upper []byte) {
	upper = slices.Clone(keyBlockKey)
	upper[len(upper)-1]++
	return keyBlockKey, upper
}

// applyBlockKey records a new block-token key and forgets all but the
// KeepBlockKeys newest (by id). Ids only grow: a key with an id at or
// below the newest stored is refused, so a proposal that lost a race
// with another leader's changes nothing.
func applyBlockKey(st *step, c *bfspb.BlockKeyCmd) (*Result, error) {
	k := c.GetKey()
	if k == nil || k.Id == 0 || len(k.Secret) < 16 {
		return nil, fmt.Errorf("%w: block key without an id or with a secret of %d bytes", ErrInvalid, len(k.GetSecret()))
	}
	keys, err := readBlockKeys(st.r)
	if err != nil {
		return nil, err
	}
	if n := len(keys); n > 0 && keys[n-1].Id >= k.Id {
		return nil, fmt.Errorf("%w: block key %d is not newer than key %d", ErrExists, k.Id, keys[n-1].Id)
	}
	v, err := proto.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := st.b.Set(blockKeyKey(k.Id), v, nil); err != nil {
		return nil, err
	}
	for _, old := range keys[:max(len(keys)+1-KeepBlockKeys, 0)] {
		if err := st.b.Delete(blockKeyKey(old.Id), nil); err != nil {
			return nil, err
		}
	}
	return &Result{}, nil
}

// BlockKeys returns the block-token keys stored, oldest first.
func (s *Store) BlockKeys() ([]*bfspb.BlockKey, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return readBlockKeys(s.db)
}

func readBlockKeys(r pebble.Reader) ([]*bfspb.BlockKey, error) {
	lower, upper := blockKeyBounds()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	var out []*bfspb.BlockKey
	for it.First(); it.Valid(); it.Next() {
		k := &bfspb.BlockKey{}
		if err := proto.Unmarshal(it.Value(), k); err != nil {
			it.Close()
			return nil, fmt.Errorf("namespace: block key %x: %w", it.Key(), err)
		}
		out = append(out, k)
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	return out, it.Close()
}
