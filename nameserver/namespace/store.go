package namespace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
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
	// ReadOnly opens an existing store without writing anything to it
	// (the checks before a start); Apply then fails.
	ReadOnly bool
	// OnLockChange, if set, is called after every command that changed a
	// directory lock has committed, before the command's path locks are
	// released: calls for the same directory come in commit order. It
	// must not block or call back into the Store.
	OnLockChange func(cmd *bfspb.Command, res *Result)
}

// Store is the namespace. See the package documentation.
type Store struct {
	db *pebble.DB
	// applyMu makes commands apply one at a time, in log order; it guards
	// counters.
	applyMu sync.Mutex
	// counters mirror the stored id and epoch counters; lastID is
	// counters.lastID for readers that do not apply.
	counters counters
	lastID   atomic.Uint64
	// applied is the log index of the last command applied.
	applied atomic.Uint64
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
	closed  atomic.Bool
	// readOnly is Options.ReadOnly.
	readOnly bool
	// restoring is set while the state is a mix left by a restore cut
	// short: nothing applies until Restore succeeds.
	restoring atomic.Bool
	// clusterID is the id the format wrote ("" until then); members the
	// member table.
	clusterID atomic.Pointer[string]
	members   atomic.Pointer[[]*bfspb.Member]
}

// Open opens (or creates) the namespace in opts.Dir. A new store is
// empty until a FormatCmd applies: no root, no cluster id.
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
		ReadOnly:           opts.ReadOnly,
	}
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("namespace: open %s: %w", opts.Dir, err)
	}
	dirEntries := opts.DirCacheEntries
	if dirEntries == 0 {
		dirEntries = defaultDirCacheEntries
	}
	s := &Store{db: db, dirs: newDirCache(dirEntries), locks: dirlock.NewTable(), open: newOpenIndex(), onLocks: opts.OnLockChange,
		readOnly: opts.ReadOnly}
	s.view = &reader{Reader: db, dirs: s.dirs}
	if err := s.load(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// load reads what the store keeps in memory: the applied index, the
// counters, the cluster id and the member table, the lock table, the
// open-file index.
func (s *Store) load() error {
	if restoring, err := s.Restoring(); restoring || err != nil {
		// A mix of two states: nothing of it is loaded, and it applies
		// nothing until restored again.
		s.setClusterID("")
		s.setMembers(nil)
		s.applied.Store(0)
		s.restoring.Store(restoring)
		return err
	}
	applied, err := s.getUint64(keyApplied)
	if err != nil {
		return err
	}
	if s.counters.lastID, err = s.getUint64(keyNextID); err != nil {
		return err
	}
	if s.counters.lastEpoch, err = s.getUint64(keyEpoch); err != nil {
		return err
	}
	s.lastID.Store(s.counters.lastID)
	id, err := s.getString(keyClusterID)
	if err != nil {
		return err
	}
	s.setClusterID(id)
	members, err := loadMembers(s.db)
	if err != nil {
		return err
	}
	s.setMembers(members)
	if err := s.loadLocks(); err != nil {
		return err
	}
	if err := s.open.load(s.db); err != nil {
		return err
	}
	s.applied.Store(applied)
	s.restoring.Store(false)
	return nil
}

// applyFormat writes the root and the cluster id, whichever is missing:
// a store formatted before cluster ids existed gets the command's id.
func applyFormat(st *step, c *bfspb.FormatCmd) (*Result, error) {
	if c.ClusterId == "" {
		return nil, fmt.Errorf("%w: format without a cluster id", ErrInvalid)
	}
	root, err := getInfo(st.r, entryKey(rootParentID, ""))
	if errors.Is(err, ErrNotFound) {
		root = &bfspb.FileInfo{EntryId: RootID, Type: bfspb.FileType_FILE_TYPE_DIR, Mode: DefaultDirMode, CtimeNs: st.now, MtimeNs: st.now}
		if err := putInfo(st.b, entryKey(rootParentID, ""), root); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	_, closer, err := st.r.Get(keyClusterID)
	switch {
	case err == nil:
		return &Result{Info: root}, closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, fmt.Errorf("namespace: read cluster id: %w", err)
	}
	st.clusterID = c.ClusterId
	return &Result{Info: root}, st.b.Set(keyClusterID, []byte(c.ClusterId), nil)
}

// Formatted reports whether a FormatCmd has applied: the store has its
// root and its cluster id.
func (s *Store) Formatted() bool { return s.ClusterID() != "" }

// NewClusterID returns a new random cluster id for a FormatCmd.
func NewClusterID() (string, error) { return newClusterID() }

func (s *Store) setClusterID(id string) { s.clusterID.Store(&id) }

// newClusterID returns 128 random bits in hex.
func newClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("namespace: cluster id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ClusterID returns the id written when the store was formatted ("" before
// that). It never changes: chunkservers record it and refuse a nameserver
// whose store has another one (see the nameserver package documentation).
func (s *Store) ClusterID() string { return *s.clusterID.Load() }

// AppliedIndex returns the log index of the last command applied (0 for
// none).
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// Close closes the store. Calls after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	// What applied without fsync is in the command log too; syncing here
	// spares replaying it at the next start.
	var err error
	if !s.readOnly {
		err = s.db.LogData(nil, pebble.Sync)
	}
	return errors.Join(err, s.db.Close())
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

func (s *Store) getString(key []byte) (string, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	return string(v), nil
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

// maxMerger keeps the largest of the 8-byte big-endian operands. Counters
// are set now (commands apply one at a time); it stays for the merge
// operands stores written before that still hold.
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
