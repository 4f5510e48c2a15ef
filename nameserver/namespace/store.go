package namespace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// FormatMajorVersion is pinned so an upgrade of Pebble never silently
// rewrites the on-disk format.
const FormatMajorVersion = pebble.FormatTableFormatV6

// Options configures a Store.
type Options struct {
	// Dir is the Pebble directory; created if missing.
	Dir string
	// Logger receives Pebble's log lines; nil drops informational lines
	// and sends errors to Pebble's default logger.
	Logger pebble.Logger
	// EventListener receives Pebble's events (flushes, compactions, stalls)
	// for metrics; may be nil.
	EventListener *pebble.EventListener
	// CacheBytes is the size of the block cache; 0 means 64 MiB.
	CacheBytes int64
	// DirCacheEntries bounds the directory cache (see dirCache); 0 means
	// 256Ki directories.
	DirCacheEntries int
	// OnLockChange, if set, is called after every command that changed a
	// directory lock has committed, before the command's path locks are
	// released: calls for the same directory come in commit order. It
	// must not block or call back into the Store.
	OnLockChange func(cmd *bfspb.Command, res *Result)
}

// Store is the namespace. See the package documentation.
type Store struct {
	db *pebble.DB
	// paths serializes mutations of overlapping paths.
	paths *pathLocks
	// dirs caches the entry ids of directories for path lookups; view is
	// the DB seen through it.
	dirs *dirCache
	view *reader
	// locks mirrors the stored directory locks; see Locks.
	locks *dirlock.Table
	// open mirrors the stored open-file records, by where the files are.
	open *openIndex
	// onLocks is Options.OnLockChange.
	onLocks func(cmd *bfspb.Command, res *Result)
	// lastID is the highest entry id handed out; lastEpoch the highest
	// lock epoch.
	lastID    atomic.Uint64
	lastEpoch atomic.Uint64
	closed    atomic.Bool
	// clusterID is the id written when the store was formatted; set by
	// init, read-only afterwards.
	clusterID string
}

// Open opens (or creates) the namespace in opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("namespace: %w: empty data directory", ErrInvalid)
	}
	if opts.DirCacheEntries < 0 {
		return nil, fmt.Errorf("namespace: %w: negative directory cache size %d", ErrInvalid, opts.DirCacheEntries)
	}
	cacheBytes := opts.CacheBytes
	if cacheBytes == 0 {
		cacheBytes = 64 << 20
	}
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref()
	if opts.Logger == nil {
		opts.Logger = quietLogger{}
	}
	po := &pebble.Options{
		Cache:              cache,
		FormatMajorVersion: FormatMajorVersion,
		Merger:             maxMerger,
		Logger:             opts.Logger,
		EventListener:      opts.EventListener,
	}
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("namespace: open %s: %w", opts.Dir, err)
	}
	dirEntries := opts.DirCacheEntries
	if dirEntries == 0 {
		dirEntries = defaultDirCacheEntries
	}
	s := &Store{db: db, paths: newPathLocks(), dirs: newDirCache(dirEntries), locks: dirlock.NewTable(), open: newOpenIndex(), onLocks: opts.OnLockChange}
	s.view = &reader{Reader: db, dirs: s.dirs}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// init creates the root on a new store, or loads what an existing one
// keeps in memory: the id and epoch counters, the lock table, the
// open-file index.
func (s *Store) init() error {
	last, err := s.getUint64(keyNextID)
	if err != nil {
		return err
	}
	s.lastID.Store(max(last, firstID-1))
	epoch, err := s.getUint64(keyEpoch)
	if err != nil {
		return err
	}
	s.lastEpoch.Store(epoch)
	_, err = s.get(entryKey(rootParentID, ""))
	if err == nil {
		if err := s.loadClusterID(); err != nil {
			return err
		}
		if err := s.loadLocks(); err != nil {
			return err
		}
		return s.open.load(s.db)
	}
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	return s.format()
}

// format writes the root and a new cluster id to an empty store, in one
// batch: a store has both or neither.
func (s *Store) format() error {
	id, err := newClusterID()
	if err != nil {
		return err
	}
	root := &bfspb.FileInfo{EntryId: RootID, Type: bfspb.FileType_FILE_TYPE_DIR, Mode: 0o755}
	b := s.db.NewBatch()
	defer b.Close()
	if err := putInfo(b, entryKey(rootParentID, ""), root); err != nil {
		return err
	}
	if err := b.Set(keyClusterID, []byte(id), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("namespace: format: %w", err)
	}
	s.clusterID = id
	return nil
}

// loadClusterID reads the cluster id of a formatted store. A store
// formatted before cluster ids existed gets one now, once.
func (s *Store) loadClusterID() error {
	v, closer, err := s.db.Get(keyClusterID)
	if err == nil {
		s.clusterID = string(v)
		return closer.Close()
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("namespace: read cluster id: %w", err)
	}
	id, err := newClusterID()
	if err != nil {
		return err
	}
	if err := s.db.Set(keyClusterID, []byte(id), pebble.Sync); err != nil {
		return fmt.Errorf("namespace: write cluster id: %w", err)
	}
	s.clusterID = id
	return nil
}

// newClusterID returns 128 random bits in hex.
func newClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("namespace: cluster id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ClusterID returns the id created when the store was formatted. It
// never changes: chunkservers record it and refuse a nameserver whose
// store has another one (see the nameserver package documentation).
func (s *Store) ClusterID() string { return s.clusterID }

// Close closes the store. Calls after Close fail with ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}

// AllocIDs reserves n new entry ids for a command. Ids are handed out in
// memory and recorded durably by the batch of the command that uses them;
// ids of commands that fail are simply skipped.
func (s *Store) AllocIDs(n int) []uint64 {
	last := s.lastID.Add(uint64(n))
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = last - uint64(n-1-i)
	}
	return ids
}

// observeID raises the in-memory counter to at least id, so a replayed or
// replicated command's ids are never handed out again.
func (s *Store) observeID(id uint64) {
	for {
		cur := s.lastID.Load()
		if cur >= id || s.lastID.CompareAndSwap(cur, id) {
			return
		}
	}
}

// reader returns the committed state to look paths up in.
func (s *Store) reader() *reader { return s.view }

// get reads a FileInfo by key from r (the DB, or an indexed batch).
func getInfo(r pebble.Reader, key []byte) (*bfspb.FileInfo, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	return decodeInfo(key, v)
}

func decodeInfo(key, value []byte) (*bfspb.FileInfo, error) {
	info := &bfspb.FileInfo{}
	if err := proto.Unmarshal(value, info); err != nil {
		return nil, fmt.Errorf("namespace: corrupt entry %x: %w", key, err)
	}
	return info, nil
}

func (s *Store) get(key []byte) (*bfspb.FileInfo, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return getInfo(s.db, key)
}

func (s *Store) getUint64(key []byte) (uint64, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	return decodeUint64(v), nil
}

func putInfo(b *pebble.Batch, key []byte, info *bfspb.FileInfo) error {
	v, err := proto.Marshal(info)
	if err != nil {
		return fmt.Errorf("namespace: encode entry: %w", err)
	}
	return b.Set(key, v, nil)
}

// maxMerger keeps the largest of the 8-byte big-endian operands, so
// counters stay monotonic whatever order concurrent batches commit in.
var maxMerger = &pebble.Merger{
	Name: "bfs.max_uint64",
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		return &maxValue{v: decodeUint64(value)}, nil
	},
}

type maxValue struct{ v uint64 }

func (m *maxValue) MergeNewer(value []byte) error { m.v = max(m.v, decodeUint64(value)); return nil }
func (m *maxValue) MergeOlder(value []byte) error { m.v = max(m.v, decodeUint64(value)); return nil }
func (m *maxValue) Finish(bool) ([]byte, io.Closer, error) {
	return encodeUint64(m.v), nil, nil
}

// quietLogger is Pebble's default logger without the informational lines.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
