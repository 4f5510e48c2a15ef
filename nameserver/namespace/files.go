package namespace

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// openFile returns the file at path if session has it open for write.
func openFile(r pebble.Reader, path, session string) (*bfspb.FileInfo, error) {
	info, err := lookup(r, path)
	if err != nil {
		return nil, err
	}
	if info.Type == bfspb.FileType_FILE_TYPE_DIR {
		return nil, ErrIsDirectory
	}
	if session == "" || info.WriterSession != session {
		return nil, ErrNotOpen
	}
	return info, nil
}

func applyAddBlock(st *step, c *bfspb.AddBlockCmd) (*Result, error) {
	blk := c.GetBlock()
	if blk.GetId() != 0 || len(blk.WriteSet) == 0 {
		return nil, fmt.Errorf("%w: add block needs a write set and no block id (it is assigned here)", ErrInvalid)
	}
	info, err := openFile(st.r, c.Path, c.SessionId)
	if err != nil {
		return nil, err
	}
	if len(info.Blocks) > 0 {
		// A retried AddBlock: the file keeps the block it has.
		return &Result{Info: info}, nil
	}
	blk = proto.Clone(blk).(*bfspb.BlockMeta)
	blk.Id = int64(st.newID())
	info.Blocks = []*bfspb.BlockMeta{blk}
	if err := st.b.Set(blockKey(blk.Id), encodeUint64(info.EntryId), nil); err != nil {
		return nil, err
	}
	return &Result{Info: info}, putInfo(st.b, keyOf(info), info)
}

func applySyncBlock(st *step, c *bfspb.SyncBlockCmd) (*Result, error) {
	info, err := openFile(st.r, c.Path, c.SessionId)
	if err != nil {
		return nil, err
	}
	blk := lastBlock(info)
	if blk == nil || blk.Id != c.BlockId {
		return nil, fmt.Errorf("%w: block %d is not the block of %s", ErrInvalid, c.BlockId, c.Path)
	}
	if c.Size < 0 {
		return nil, fmt.Errorf("%w: negative size", ErrInvalid)
	}
	blk.Size = max(blk.Size, c.Size)
	info.Size = blk.Size
	blk.WriteSet = Without(blk.WriteSet, c.Dropped)
	return &Result{Info: info}, putInfo(st.b, keyOf(info), info)
}

func applyCloseFile(st *step, c *bfspb.CloseFileCmd) (*Result, error) {
	info, err := lookup(st.r, c.Path)
	if err != nil {
		return nil, err
	}
	if info.EntryId != c.EntryId {
		return nil, fmt.Errorf("%w: %s is no longer entry %d", ErrNotFound, c.Path, c.EntryId)
	}
	if info.WriterSession == "" {
		return &Result{Info: info}, nil // closed already: a retry
	}
	if blk := lastBlock(info); (blk == nil && c.BlockId != 0) || (blk != nil && blk.Id != c.BlockId) {
		return nil, fmt.Errorf("%w: %s has another last block than %d", ErrBlockChanged, c.Path, c.BlockId)
	}
	if err := st.b.Delete(openKey(info.WriterSession, info.EntryId), nil); err != nil {
		return nil, err
	}
	info.WriterSession = ""
	info.MtimeNs = st.now
	if blk := lastBlock(info); blk != nil {
		if c.BlockSize < 0 {
			return nil, fmt.Errorf("%w: negative size", ErrInvalid)
		}
		blk.Size = c.BlockSize
		blk.WriteSet = Without(blk.WriteSet, c.Dropped)
	}
	info.Size = 0
	for _, blk := range info.Blocks {
		info.Size += blk.Size
	}
	return &Result{Info: info}, putInfo(st.b, keyOf(info), info)
}

func lastBlock(info *bfspb.FileInfo) *bfspb.BlockMeta {
	if len(info.Blocks) == 0 {
		return nil
	}
	return info.Blocks[len(info.Blocks)-1]
}

// Without returns the addresses of set that are not in dropped, in a new
// slice: a write set less the replicas its writer dropped.
func Without(set, dropped []string) []string {
	return slices.DeleteFunc(slices.Clone(set), func(a string) bool { return slices.Contains(dropped, a) })
}

// OpenFile is a file open for write, as the open-file index records it.
type OpenFile struct {
	Session string
	EntryID uint64
}

// OpenFiles lists the files open for write by session, or by any session
// if session is "".
func (s *Store) OpenFiles(session string) ([]OpenFile, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	lower, upper := openBounds(session)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("namespace: iterate open files: %w", err)
	}
	var out []OpenFile
	for valid := it.First(); valid; valid = it.Next() {
		sess, id := openKeyEntry(it.Key())
		out = append(out, OpenFile{Session: sess, EntryID: id})
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, fmt.Errorf("namespace: iterate open files: %w", err)
	}
	return out, it.Close()
}

// PathOf returns the current path of entry id and its FileInfo.
func (s *Store) PathOf(id uint64) (string, *bfspb.FileInfo, error) {
	if s.closed.Load() {
		return "", nil, ErrClosed
	}
	return pathOf(s.db, id)
}

func pathOf(r pebble.Reader, id uint64) (string, *bfspb.FileInfo, error) {
	if id == RootID {
		info, err := getInfo(r, entryKey(rootParentID, ""))
		return "/", info, err
	}
	var names []string
	var leaf *bfspb.FileInfo
	for cur := id; cur != RootID; {
		v, closer, err := r.Get(idKey(cur))
		if err != nil {
			if err == pebble.ErrNotFound {
				return "", nil, ErrNotFound
			}
			return "", nil, fmt.Errorf("namespace: read: %w", err)
		}
		parent, name := decodeUint64(v[:8]), string(v[8:])
		closer.Close()
		if leaf == nil {
			if leaf, err = getInfo(r, entryKey(parent, name)); err != nil {
				return "", nil, err
			}
		}
		names = append(names, name)
		cur = parent
	}
	slices.Reverse(names)
	return "/" + strings.Join(names, "/"), leaf, nil
}

// BlockOwner returns the entry id of the file block belongs to.
func (s *Store) BlockOwner(block int64) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	v, closer, err := s.db.Get(blockKey(block))
	if err == pebble.ErrNotFound {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	return decodeUint64(v), nil
}

// BlockFate is what the namespace knows of a block id.
type BlockFate int

const (
	// BlockLive: a file has the block.
	BlockLive BlockFate = iota
	// BlockGone: the id was handed out by this namespace and no file has
	// it: its file was deleted, it was superseded, or the command that
	// took it never committed. Its replicas can go.
	BlockGone
	// BlockUnknown: the id is above every id this namespace handed out.
	// The namespace knows nothing of it (a namespace restored from an
	// older copy, say): its replicas must be kept.
	BlockUnknown
)

// Fate tells what the namespace positively knows of block. Any error
// means it knows nothing; callers keep the replica.
func (s *Store) Fate(block int64) (BlockFate, error) {
	_, err := s.BlockOwner(block)
	switch {
	case err == nil:
		return BlockLive, nil
	case !errors.Is(err, ErrNotFound):
		return BlockUnknown, err
	case block <= 0 || uint64(block) > s.lastID.Load():
		return BlockUnknown, nil
	}
	return BlockGone, nil
}

// BlockIDs calls fn with the id of every block a file has.
func (s *Store) BlockIDs(fn func(id int64)) error {
	if s.closed.Load() {
		return ErrClosed
	}
	lower, upper := prefixBounds(prefixBlock)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("namespace: read: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); len(k) == 9 {
			fn(int64(decodeUint64(k[1:])))
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return fmt.Errorf("namespace: read: %w", err)
	}
	return it.Close()
}
