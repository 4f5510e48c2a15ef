package namespace

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// FileBlock is a block as the repair of replicas sees it: its meta (the
// length agreed at close, the version), and its file's replication and
// whether the file is still open for write.
type FileBlock struct {
	Meta        *bfspb.BlockMeta
	Entry       uint64
	Replication int
	Open        bool
}

// fileBlocks returns the blocks of a file entry.
func fileBlocks(info *bfspb.FileInfo) []FileBlock {
	if info.Type == bfspb.FileType_FILE_TYPE_DIR {
		return nil
	}
	out := make([]FileBlock, len(info.Blocks))
	for i, b := range info.Blocks {
		out[i] = FileBlock{Meta: b, Entry: info.EntryId, Replication: int(info.Replication), Open: info.WriterSession != ""}
	}
	return out
}

// FileBlocks calls fn with every block of every file, in one pass over
// the entries (one iterator, no per-block lookup: a million blocks take
// about as long as reading their entries). It stops at the first error fn
// returns and returns it. What it sees is the state at some moment during
// the pass, per entry; callers that act on a block look it up again
// (Block).
func (s *Store) FileBlocks(fn func(FileBlock) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	lower, upper := prefixBounds(prefixEntry)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("namespace: iterate: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		info, err := decodeInfo(it.Key(), it.Value())
		if err == nil {
			for _, b := range fileBlocks(info) {
				if err = fn(b); err != nil {
					break
				}
			}
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return fmt.Errorf("namespace: iterate: %w", err)
	}
	return it.Close()
}

// Block returns block and its file as FileBlocks would; ErrNotFound if no
// file has it.
func (s *Store) Block(block int64) (FileBlock, error) {
	entry, err := s.BlockOwner(block)
	if err != nil {
		return FileBlock{}, err
	}
	info, err := entryOf(s.db, entry)
	if err != nil {
		return FileBlock{}, err
	}
	for _, b := range fileBlocks(info) {
		if b.Meta.Id == block {
			return b, nil
		}
	}
	return FileBlock{}, ErrNotFound
}

// entryOf reads the FileInfo of entry id through where it is (its 'i'
// record).
func entryOf(r pebble.Reader, id uint64) (*bfspb.FileInfo, error) {
	v, closer, err := r.Get(idKey(id))
	if err == pebble.ErrNotFound {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	if len(v) < 8 {
		closer.Close()
		return nil, fmt.Errorf("namespace: corrupt location of entry %d", id)
	}
	key := entryKey(decodeUint64(v[:8]), string(v[8:]))
	closer.Close()
	return getInfo(r, key)
}
