package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// LogFormatMajorVersion is pinned so an upgrade of Pebble never silently
// rewrites the log store's on-disk format.
const LogFormatMajorVersion = pebble.FormatTableFormatV6

// logEntryVersion is the first byte of every stored log entry (see
// encodeLog). A new encoding takes a new number; decodeLog refuses the
// numbers it does not know.
const logEntryVersion = 1

var (
	// ErrKeyNotFound is what Get returns for a missing stable key. Its
	// text is part of the contract: raft tells a missing key from a
	// failed read by comparing an error's text with "not found".
	ErrKeyNotFound = errors.New("not found")
	// ErrCorrupt wraps every error about stored bytes that do not decode.
	ErrCorrupt = errors.New("corrupt log store")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("replica: log store closed")
)

// Keys. Log keys are the prefix and the big-endian index, so Pebble's
// order is index order; stable keys are the prefix and raft's key; one
// key names the store's format, written when the store is created.
const (
	prefixLog    = 'l'
	prefixStable = 's'
	logKeyLen    = 1 + 8
	// logStoreFormat is the value of keyFormat: a directory with another
	// value, or with data but no keyFormat, is refused.
	logStoreFormat = "bfs-raft-log/1"
)

var (
	keyFormat = []byte("format")
	logLower  = []byte{prefixLog}
	logUpper  = []byte{prefixLog + 1}
)

func logKey(index uint64) []byte {
	k := make([]byte, logKeyLen)
	putLogKey(k, index)
	return k
}

func putLogKey(k []byte, index uint64) {
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
}

func stableKey(key []byte) []byte {
	return append([]byte{prefixStable}, key...)
}

// LogStoreOptions configures a LogStore.
type LogStoreOptions struct {
	// Dir is the Pebble directory, created if missing. It must not be the
	// namespace's.
	Dir string
	// Logger receives Pebble's log lines; nil means Pebble's default
	// logger (standard error). The nameserver passes its glog logger, as
	// it does for the namespace.
	Logger pebble.Logger
	// EventListener receives Pebble's events (flushes, compactions,
	// stalls, slow disks) for metrics; may be nil.
	EventListener *pebble.EventListener
	// ReadOnly opens an existing store without writing anything to it
	// (the checks before a start); writes then fail.
	ReadOnly bool
	// Cache is the block cache, to share one with other stores; nil gives
	// the store a private cache of 8 MiB (recent entries are read from
	// raft.LogCache, not from here).
	Cache *pebble.Cache
}

// LogStore keeps raft's log and its stable values (term, vote) in a Pebble
// directory of their own. It implements raft.LogStore, raft.StableStore
// and raft.MonotonicLogStore. See the package documentation.
type LogStore struct {
	db *pebble.DB

	// life guards db against Close: every call holds it shared, Close
	// holds it exclusively, so no call reaches a closed Pebble.
	life struct {
		sync.RWMutex
		closed bool
	}
	// write serializes StoreLogs and DeleteRange, held across their
	// commits, so that bounds change in commit order.
	write sync.Mutex
	// bounds are the lowest and highest stored log indexes, 0 and 0 when
	// there are none. Only a writer holding write changes them, after its
	// batch committed.
	bounds struct {
		sync.Mutex
		first, last uint64
	}
}

var (
	_ raft.LogStore          = (*LogStore)(nil)
	_ raft.StableStore       = (*LogStore)(nil)
	_ raft.MonotonicLogStore = (*LogStore)(nil)
)

// OpenLogStore opens (or creates) the log store in opts.Dir.
func OpenLogStore(opts LogStoreOptions) (*LogStore, error) {
	if opts.Dir == "" {
		return nil, errors.New("replica: log store: empty directory")
	}
	cache := opts.Cache
	if cache == nil {
		cache = pebble.NewCache(8 << 20)
		defer cache.Unref()
	}
	po := &pebble.Options{
		Cache:              cache,
		FormatMajorVersion: LogFormatMajorVersion,
		Logger:             opts.Logger, // nil: Pebble's default
		EventListener:      opts.EventListener,
		ReadOnly:           opts.ReadOnly,
	}
	// Defaults here, not in Open, so that the disk-health-checking FS
	// Pebble wraps around the disk is ours to close when Open fails:
	// Open leaves its goroutine running (DB.Close stops it otherwise).
	po.EnsureDefaults()
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		if c, ok := po.FS.(io.Closer); ok {
			c.Close()
		}
		return nil, fmt.Errorf("replica: open log store %s: %w", opts.Dir, err)
	}
	s := &LogStore{db: db}
	err = s.checkFormat(opts.Dir, opts.ReadOnly)
	if err == nil {
		s.bounds.first, err = s.seek(0, false)
	}
	if err == nil {
		s.bounds.last, err = s.seek(math.MaxUint64, true)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// checkFormat refuses a directory that holds another format or other data
// (the namespace's, say), and marks a new one as a log store.
func (s *LogStore) checkFormat(dir string, readOnly bool) error {
	v, closer, err := s.db.Get(keyFormat)
	if err == nil {
		defer closer.Close()
		if string(v) != logStoreFormat {
			return fmt.Errorf("replica: %s holds a log store of format %q; this build reads %q", dir, v, logStoreFormat)
		}
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("replica: open log store %s: %w", dir, err)
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("replica: open log store %s: %w", dir, err)
	}
	used := it.First()
	if err := it.Close(); err != nil {
		return fmt.Errorf("replica: open log store %s: %w", dir, err)
	}
	if used {
		return fmt.Errorf("replica: %s holds data that is not a raft log store (is it another store's directory?)", dir)
	}
	if readOnly {
		return nil
	}
	if err := s.db.Set(keyFormat, []byte(logStoreFormat), pebble.Sync); err != nil {
		return fmt.Errorf("replica: create log store %s: %w", dir, err)
	}
	return nil
}

// Close closes Pebble, after the calls in flight have returned. Calls
// after Close fail with ErrClosed; a second Close does nothing.
func (s *LogStore) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.life.closed {
		return nil
	}
	s.life.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("replica: close log store: %w", err)
	}
	return nil
}

// enter holds the store open for one call; the caller defers s.life.RUnlock
// when it returns nil.
func (s *LogStore) enter() error {
	s.life.RLock()
	if s.life.closed {
		s.life.RUnlock()
		return ErrClosed
	}
	return nil
}

// FirstIndex returns the lowest stored index, 0 for an empty log. It reads
// memory only.
func (s *LogStore) FirstIndex() (uint64, error) {
	first, _, err := s.Bounds()
	return first, err
}

// LastIndex returns the highest stored index, 0 for an empty log. It reads
// memory only.
func (s *LogStore) LastIndex() (uint64, error) {
	_, last, err := s.Bounds()
	return last, err
}

// Bounds returns FirstIndex and LastIndex as one consistent pair.
func (s *LogStore) Bounds() (first, last uint64, err error) {
	if err := s.enter(); err != nil {
		return 0, 0, err
	}
	defer s.life.RUnlock()
	s.bounds.Lock()
	defer s.bounds.Unlock()
	return s.bounds.first, s.bounds.last, nil
}

// IsMonotonic tells raft to delete the whole log after it restores or
// installs a snapshot instead of leaving a gap before the new entries:
// here that is one range deletion. The store itself accepts gaps.
func (s *LogStore) IsMonotonic() bool { return true }

// GetLog reads the entry at index into log. A missing entry is
// raft.ErrLogNotFound itself (raft compares with ==); bytes that do not
// decode are ErrCorrupt.
func (s *LogStore) GetLog(index uint64, log *raft.Log) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("replica: read log %d: %w", index, err)
	}
	defer closer.Close()
	l, err := decodeLog(v)
	if err != nil {
		return fmt.Errorf("replica: log %d: %w", index, err)
	}
	if l.Index != index {
		return fmt.Errorf("replica: log %d: %w: the entry says index %d", index, ErrCorrupt, l.Index)
	}
	*log = l
	return nil
}

// StoreLog stores one entry; see StoreLogs.
func (s *LogStore) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores the entries in one batch committed with pebble.Sync:
// when it returns nil they survive a crash, all or none. An entry at an
// index already stored replaces it. Index 0 is refused: a bound of 0 means
// an empty log.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for i, l := range logs {
		if l == nil || l.Index == 0 {
			return fmt.Errorf("replica: store logs: entry %d of %d has no index", i, len(logs))
		}
		op := b.SetDeferred(logKeyLen, encodedLen(l))
		putLogKey(op.Key, l.Index)
		encodeLog(op.Value, l)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("replica: store log %d: %w", l.Index, err)
		}
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}
	s.write.Lock()
	defer s.write.Unlock()
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("replica: store logs %d..%d: %w", lo, hi, err)
	}
	s.bounds.Lock()
	if s.bounds.first == 0 || lo < s.bounds.first {
		s.bounds.first = lo
	}
	s.bounds.last = max(s.bounds.last, hi)
	s.bounds.Unlock()
	return nil
}

// DeleteRange deletes the entries from lo to hi inclusive with one range
// deletion committed with pebble.Sync. A range with lo > hi deletes
// nothing. When it covers the first or the last stored entry, the new
// bound is the next stored entry (one seek).
func (s *LogStore) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	end := logUpper
	if hi < math.MaxUint64 {
		end = logKey(hi + 1)
	}
	s.write.Lock()
	defer s.write.Unlock()
	// The bounds move before the entries go: a reader never finds an
	// index within the bounds it read missing. (A delete that then fails
	// leaves entries outside the bounds, unread; the node stops on it.)
	first, last, err := s.boundsAfterDelete(lo, hi)
	if err != nil {
		return err
	}
	s.bounds.Lock()
	s.bounds.first, s.bounds.last = first, last
	s.bounds.Unlock()
	if err := s.db.DeleteRange(logKey(lo), end, pebble.Sync); err != nil {
		return fmt.Errorf("replica: delete logs %d..%d: %w", lo, hi, err)
	}
	return nil
}

// boundsAfterDelete returns the bounds once lo..hi is deleted, read
// before it is. The caller holds write, so the bounds it reads are the
// stored ones.
func (s *LogStore) boundsAfterDelete(lo, hi uint64) (first, last uint64, err error) {
	s.bounds.Lock()
	first, last = s.bounds.first, s.bounds.last
	s.bounds.Unlock()
	switch {
	case first == 0 || hi < first || lo > last:
		return first, last, nil
	case lo <= first && hi >= last:
		return 0, 0, nil
	}
	if lo <= first {
		first, err = s.seek(hi+1, false)
	}
	if err == nil && hi >= last {
		last, err = s.seek(lo-1, true)
	}
	return first, last, err
}

// seek returns the index of the first stored entry at or after index, or
// with back the last at or before it; 0 when there is none.
func (s *LogStore) seek(index uint64, back bool) (found uint64, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logLower, UpperBound: logUpper})
	if err != nil {
		return 0, fmt.Errorf("replica: log bounds: %w", err)
	}
	var ok bool
	switch {
	case !back:
		ok = it.SeekGE(logKey(index))
	case index == math.MaxUint64:
		ok = it.Last()
	default:
		ok = it.SeekLT(logKey(index + 1))
	}
	if ok {
		if k := it.Key(); len(k) == logKeyLen {
			found = binary.BigEndian.Uint64(k[1:])
		} else {
			err = fmt.Errorf("replica: log bounds: %w: log key of %d bytes", ErrCorrupt, len(k))
		}
	}
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("replica: log bounds: %w", cerr)
	}
	return found, err
}

// Set stores a stable value, synced.
func (s *LogStore) Set(key, val []byte) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	if err := s.db.Set(stableKey(key), val, pebble.Sync); err != nil {
		return fmt.Errorf("replica: set %q: %w", key, err)
	}
	return nil
}

// Get returns a stable value, or nil and ErrKeyNotFound when key was never
// set.
func (s *LogStore) Get(key []byte) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.life.RUnlock()
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("replica: get %q: %w", key, err)
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// SetUint64 stores val as the stable value of key, 8 bytes big-endian.
func (s *LogStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the stable value of key, 0 when key was never set (as
// raft.InmemStore does). A value that is not 8 bytes is ErrCorrupt.
func (s *LogStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if errors.Is(err, ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("replica: get %q: %w: %d bytes, not a uint64", key, ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// The encoding of a raft.Log, version 1 (all integers big-endian):
//
//	offset  size  field
//	0       1     version, 1
//	1       8     Index (equal to the key's)
//	9       8     Term
//	17      1     Type
//	18      8     AppendedAt, seconds since 1970 UTC (signed; the zero time is -62135596800)
//	26      4     AppendedAt, nanoseconds within the second (< 1e9)
//	30      ...   uvarint len(Data), Data, uvarint len(Extensions), Extensions
//
// and nothing after. AppendedAt comes back in UTC (compare with Equal);
// an empty Data or Extensions comes back nil.
const logHeaderLen = 30

func encodedLen(l *raft.Log) int {
	return logHeaderLen + uvarintLen(len(l.Data)) + len(l.Data) + uvarintLen(len(l.Extensions)) + len(l.Extensions)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// encodeLog writes l into dst, which has exactly encodedLen(l) bytes.
func encodeLog(dst []byte, l *raft.Log) {
	dst[0] = logEntryVersion
	binary.BigEndian.PutUint64(dst[1:], l.Index)
	binary.BigEndian.PutUint64(dst[9:], l.Term)
	dst[17] = byte(l.Type)
	binary.BigEndian.PutUint64(dst[18:], uint64(l.AppendedAt.Unix()))
	binary.BigEndian.PutUint32(dst[26:], uint32(l.AppendedAt.Nanosecond()))
	rest := dst[logHeaderLen:]
	for _, field := range [][]byte{l.Data, l.Extensions} {
		n := binary.PutUvarint(rest, uint64(len(field)))
		rest = rest[n+copy(rest[n:], field):]
	}
}

// decodeLog decodes an encoded entry into a log that owns its bytes
// (src may be Pebble's buffer). Anything but an exact encoding (one that
// encodeLog would write again byte for byte) is an error wrapping
// ErrCorrupt.
func decodeLog(src []byte) (raft.Log, error) {
	if len(src) < logHeaderLen {
		return raft.Log{}, fmt.Errorf("%w: entry of %d bytes", ErrCorrupt, len(src))
	}
	if src[0] != logEntryVersion {
		return raft.Log{}, fmt.Errorf("%w: entry encoding version %d, want %d", ErrCorrupt, src[0], logEntryVersion)
	}
	nanos := binary.BigEndian.Uint32(src[26:])
	if nanos >= 1e9 {
		return raft.Log{}, fmt.Errorf("%w: entry time has %d nanoseconds", ErrCorrupt, nanos)
	}
	buf := append([]byte(nil), src[logHeaderLen:]...)
	data, rest, err := decodeBytes(buf)
	if err != nil {
		return raft.Log{}, err
	}
	ext, rest, err := decodeBytes(rest)
	if err != nil {
		return raft.Log{}, err
	}
	if len(rest) != 0 {
		return raft.Log{}, fmt.Errorf("%w: %d bytes after the entry", ErrCorrupt, len(rest))
	}
	return raft.Log{
		Index:      binary.BigEndian.Uint64(src[1:]),
		Term:       binary.BigEndian.Uint64(src[9:]),
		Type:       raft.LogType(src[17]),
		AppendedAt: time.Unix(int64(binary.BigEndian.Uint64(src[18:])), int64(nanos)).UTC(),
		Data:       data,
		Extensions: ext,
	}, nil
}

// decodeBytes reads one length-prefixed field off the front of src; the
// field is capped so that appending to it cannot overwrite what follows.
func decodeBytes(src []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(src)
	if k <= 0 {
		return nil, nil, fmt.Errorf("%w: bad field length", ErrCorrupt)
	}
	src = src[k:]
	if n > uint64(len(src)) {
		return nil, nil, fmt.Errorf("%w: field of %d bytes with %d left", ErrCorrupt, n, len(src))
	}
	if k != uvarintLen(int(n)) {
		return nil, nil, fmt.Errorf("%w: field length in %d bytes, not %d", ErrCorrupt, k, uvarintLen(int(n)))
	}
	if n == 0 {
		return nil, src, nil
	}
	return src[:n:n], src[n:], nil
}
