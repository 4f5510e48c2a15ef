package namespace

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// FileBlock is a block as the repair of replicas sees it: its id, its
// length (agreed at close; while the file is open, last synced) and
// version, and its file's entry id, replication and whether the file is
// still open for write.
type FileBlock struct {
	ID          int64
	Size        int64
	Version     uint64
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
		out[i] = FileBlock{ID: b.Id, Size: b.Size, Version: b.Version, Entry: info.EntryId,
			Replication: int(info.Replication), Open: info.WriterSession != ""}
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
		bs, err := decodeBlocks(it.Value())
		if err != nil {
			err = fmt.Errorf("namespace: corrupt entry %x: %w", it.Key(), err)
		}
		for _, b := range bs {
			if err != nil {
				break
			}
			err = fn(b)
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
		if b.ID == block {
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

// The fields of a FileInfo that decodeBlocks reads, by number, taken from
// the descriptor so that they follow the .proto file.
var (
	fieldEntryID     = fieldNumber("entry_id")
	fieldType        = fieldNumber("type")
	fieldReplication = fieldNumber("replication")
	fieldBlocks      = fieldNumber("blocks")
	fieldWriter      = fieldNumber("writer_session")

	blockMeta    = (&bfspb.BlockMeta{}).ProtoReflect().Descriptor().Fields()
	fieldID      = blockMeta.ByName("id").Number()
	fieldSize    = blockMeta.ByName("size").Number()
	fieldVersion = blockMeta.ByName("version").Number()
)

func fieldNumber(name protoreflect.Name) protowire.Number {
	return (&bfspb.FileInfo{}).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// decodeBlocks returns the blocks of an encoded FileInfo as fileBlocks
// would, reading only the fields it needs: the full pass over a million
// entries spends most of its time decoding, and the names, write sets,
// times and lock fields a full decode allocates are of no use to it.
func decodeBlocks(v []byte) ([]FileBlock, error) {
	var (
		fb     FileBlock
		dir    bool
		blocks [][]byte
	)
	err := eachField(v, func(num protowire.Number, typ protowire.Type, val uint64, raw []byte) {
		switch {
		case num == fieldEntryID && typ == protowire.VarintType:
			fb.Entry = val
		case num == fieldType && typ == protowire.VarintType:
			dir = bfspb.FileType(val) == bfspb.FileType_FILE_TYPE_DIR
		case num == fieldReplication && typ == protowire.VarintType:
			fb.Replication = int(val)
		case num == fieldWriter && typ == protowire.BytesType:
			fb.Open = len(raw) > 0
		case num == fieldBlocks && typ == protowire.BytesType:
			blocks = append(blocks, raw)
		}
	})
	if err != nil || dir {
		return nil, err
	}
	out := make([]FileBlock, len(blocks))
	for i, raw := range blocks {
		out[i] = fb
		err := eachField(raw, func(num protowire.Number, typ protowire.Type, val uint64, _ []byte) {
			if typ != protowire.VarintType {
				return
			}
			switch num {
			case fieldID:
				out[i].ID = int64(val)
			case fieldSize:
				out[i].Size = int64(val)
			case fieldVersion:
				out[i].Version = val
			}
		})
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", i, err)
		}
	}
	return out, nil
}

// eachField calls fn with every field of an encoded message: its number,
// its wire type, and its value (varints) or bytes (length-delimited);
// other wire types are skipped.
func eachField(v []byte, fn func(num protowire.Number, typ protowire.Type, val uint64, raw []byte)) error {
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		v = v[n:]
		var val uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			val, n = protowire.ConsumeVarint(v)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(v)
		default:
			n = protowire.ConsumeFieldValue(num, typ, v)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		v = v[n:]
		fn(num, typ, val, raw)
	}
	return nil
}
