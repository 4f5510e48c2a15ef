package blockstore

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// BlockID names a block; every replica of a block has the same id.
type BlockID int64

// Packet is one piece of a block's data as a writer sends it.
type Packet struct {
	BlockID BlockID
	// Offset is where Data starts in the block; it must equal the replica's
	// size when the packet is applied.
	Offset int64
	// Seq numbers the packets of a block from 1, without gaps.
	Seq  int64
	Data []byte
	// CRC32C is the Castagnoli checksum of Data (see Checksum).
	CRC32C uint32
	// Sync makes every byte up to Offset+len(Data) durable before Write
	// returns.
	Sync bool
	// Last seals the replica at Offset+len(Data) (after syncing).
	Last    bool
	Version uint64
	// Writer names where the packet comes from (the chunkserver numbers
	// its write streams); 0 is nobody in particular. Only the writer of
	// the packet applied last is told the replica's sequence numbers when
	// a packet is refused: anyone else gets a refusal that does not tell a
	// gap from a wrong offset or a mismatched retransmit.
	Writer WriterID
}

// WriterID names the source of packets, e.g. one write stream.
type WriterID uint64

// BlockInfo describes a replica, as a block report carries it.
type BlockInfo struct {
	ID BlockID
	// Size is the number of bytes the replica holds (written, not
	// necessarily synced while it is unsealed).
	Size    int64
	Version uint64
	Sealed  bool
}

// Store keeps block replicas in a directory. See the package documentation.
type Store struct {
	dir    string
	flock  *os.File
	closed atomic.Bool
	// dirs holds the fan-out directories known to exist (string →
	// *dirState).
	dirs sync.Map
	log  *metaLog
	// fault is TestingKnobs.Fault; nil in production.
	fault func(op Op, path string) error

	// Kept up to date on every size change, so a heartbeat reads them
	// without visiting the blocks.
	blockCount, byteCount atomic.Int64

	mu struct {
		sync.Mutex
		// blocks holds every replica on disk and, for a moment, entries being
		// created. Never held while waiting for a block's locks.
		blocks map[BlockID]*block
	}
}

// Open opens (creating if needed) the store in dir and recovers what a
// crash left: sealed replicas whole, unsealed ones cut to their last
// synced size. Only one Store may have dir open at a time.
func Open(dir string) (*Store, error) {
	return open(dir, options{logLimit: defaultLogLimit})
}

// options are the knobs tests turn.
type options struct {
	// logLimit is the size at which the meta log moves to a new file.
	logLimit int64
	// beforeFrame, if set, is called by the committer with the number of
	// records of each frame before it writes the frame.
	beforeFrame func(records int)
	// fault is TestingKnobs.Fault.
	fault func(op Op, path string) error
}

func open(dir string, o options) (*Store, error) {
	for _, d := range []string{blocksDir, logDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("blockstore: %w", err)
		}
	}
	fl, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, flock: fl, fault: o.fault}
	s.mu.blocks = make(map[BlockID]*block)
	gen, pending, err := s.recover()
	if err == nil {
		s.log, err = openLog(filepath.Join(dir, logDir), gen+1, o, s.checkpoint, pending)
	}
	if err != nil {
		if fl != nil {
			fl.Close()
		}
		return nil, fmt.Errorf("blockstore: recover %s: %w", dir, err)
	}
	return s, nil
}

// Close closes the files of replicas being written and writes what the
// meta log holds into the meta files. Later calls fail with ErrClosed.
// Unsynced bytes stay in the page cache; they are only guaranteed to
// survive a crash if a Sync, Last or Seal covered them.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	blocks := s.snapshot()
	for _, b := range blocks { // waits for the operations in progress
		b.mu.Lock()
		if b.mu.f != nil {
			errs = append(errs, b.mu.f.Close())
			b.mu.f = nil
		}
		b.mu.Unlock()
	}
	errs = append(errs, s.log.close(blocks))
	if s.flock != nil {
		errs = append(errs, s.flock.Close())
	}
	return errors.Join(errs...)
}

// Info describes the replica of block id.
func (s *Store) Info(id BlockID) (BlockInfo, error) {
	b, err := s.acquire(id, false, rwNone)
	if err != nil {
		return BlockInfo{}, err
	}
	defer s.release(b, rwNone)
	return b.infoLocked(), nil
}

// List describes every replica in the store, by increasing id.
func (s *Store) List() []BlockInfo {
	blocks := s.snapshot()
	infos := make([]BlockInfo, 0, len(blocks))
	for _, b := range blocks {
		b.mu.Lock()
		if b.mu.exists && !b.mu.removed {
			infos = append(infos, b.infoLocked())
		}
		b.mu.Unlock()
	}
	slices.SortFunc(infos, func(a, b BlockInfo) int { return cmp.Compare(a.ID, b.ID) })
	return infos
}

// Usage returns the number of replicas and the bytes they hold.
func (s *Store) Usage() (blocks, bytes int64) {
	return s.blockCount.Load(), s.byteCount.Load()
}

// Delete removes the replica of block id.
func (s *Store) Delete(id BlockID) error {
	b, err := s.acquire(id, false, rwExclusive)
	if err != nil {
		return err
	}
	defer s.release(b, rwExclusive)
	// A replica with records in the meta log would come back from them
	// after a crash: the log says it is gone before its files go.
	if b.mu.gen > s.log.retired.Load() {
		if _, err := s.log.append(b, deleteRecord(id)); err != nil {
			return fmt.Errorf("blockstore: delete block %d: %w", id, err)
		}
	}
	if b.mu.f != nil {
		b.mu.f.Close()
		b.mu.f, b.mu.crcs = nil, nil
	}
	// Meta first: a crash in between leaves a data file without meta, which
	// Open removes.
	base := s.base(id)
	if err := removeIfExists(base + metaExt); err != nil {
		return fmt.Errorf("blockstore: delete block %d: %w", id, err)
	}
	if err := removeIfExists(base + dataExt); err != nil {
		return fmt.Errorf("blockstore: delete block %d: %w", id, err)
	}
	s.blockCount.Add(-1)
	s.byteCount.Add(-b.mu.m.size)
	b.mu.exists = false
	s.forgetLocked(b)
	return nil
}

func (s *Store) snapshot() []*block {
	s.mu.Lock()
	defer s.mu.Unlock()
	blocks := make([]*block, 0, len(s.mu.blocks))
	for _, b := range s.mu.blocks {
		blocks = append(blocks, b)
	}
	return blocks
}

// rwMode says how acquire takes a block's rw lock.
type rwMode int

const (
	rwNone      rwMode = iota // writers, sealers: mu only
	rwShared                  // readers
	rwExclusive               // Truncate and Delete, which shrink or remove files
)

// acquire returns the live entry of id with its locks held as mode says
// (rw first, then mu). With create, a missing entry is made (with no files
// yet: exists is false); without, a replica that does not exist is
// ErrNotFound.
func (s *Store) acquire(id BlockID, create bool, mode rwMode) (*block, error) {
	for {
		b := s.entry(id, create)
		if b == nil {
			return nil, s.notFound(id)
		}
		b.lock(mode)
		switch {
		case s.closed.Load():
			b.unlock(mode)
			return nil, ErrClosed
		case b.mu.removed:
			b.unlock(mode) // deleted meanwhile: look again
		case !create && !b.mu.exists:
			s.release(b, mode)
			return nil, s.notFound(id)
		default:
			return b, nil
		}
	}
}

func (s *Store) notFound(id BlockID) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return fmt.Errorf("%w: block %d", ErrNotFound, id)
}

// release unlocks b, first dropping an entry that never got its files.
func (s *Store) release(b *block, mode rwMode) {
	if !b.mu.exists && !b.mu.removed {
		s.forgetLocked(b)
	}
	b.unlock(mode)
}

func (s *Store) entry(id BlockID, create bool) *block {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.mu.blocks[id]
	if b == nil && create && !s.closed.Load() {
		b = &block{id: id}
		s.mu.blocks[id] = b
	}
	return b
}

// forgetLocked removes b (whose mu is held) from the map.
func (s *Store) forgetLocked(b *block) {
	b.mu.removed = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.blocks[b.id] == b {
		delete(s.mu.blocks, b.id)
	}
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Has reports whether the store holds block id or is creating it, without
// waiting for anything the replica is doing.
func (s *Store) Has(id BlockID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.blocks[id] != nil
}
