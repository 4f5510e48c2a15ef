package blockstore

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/golang/glog"
)

// recover loads every replica under dir/blocks, replaying the meta logs
// over the meta files, then checkpoints what the logs said and removes
// them. It returns the newest log generation it found (0 for none) and,
// on a disk with no room for the checkpoint, the logs it could not
// retire (see retireRecovered). It runs before the store is shared, so
// it takes no locks.
func (s *Store) recover() (uint64, []fullLog, error) {
	logs, err := listLogs(filepath.Join(s.dir, logDir))
	if err != nil {
		return 0, nil, err
	}
	logged, err := readLogs(logs)
	if err != nil {
		return 0, nil, err
	}
	if err := s.recoverDirs(logged); err != nil {
		return 0, nil, err
	}
	// What is left of the logs names replicas without any file here.
	for _, id := range slices.Sorted(maps.Keys(logged)) {
		if err := s.recoverLogged(s.base(id), logged[id]); err != nil {
			return 0, nil, err
		}
	}
	return s.retireRecovered(logs)
}

// recoverDirs walks the fan-out directories, taking from logged the last
// log record of every replica found in them.
func (s *Store) recoverDirs(logged map[BlockID]logRecord) error {
	root := filepath.Join(s.dir, blocksDir)
	tops, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, top := range tops {
		if !top.IsDir() {
			continue
		}
		leaves, err := os.ReadDir(filepath.Join(root, top.Name()))
		if err != nil {
			return err
		}
		for _, leaf := range leaves {
			if !leaf.IsDir() {
				continue
			}
			dir := filepath.Join(root, top.Name(), leaf.Name())
			if err := s.recoverDir(dir, logged); err != nil {
				return err
			}
			s.dirs.Store(dir, &dirState{})
		}
	}
	return nil
}

// retireRecovered writes the metas the logs held into the meta files and
// removes the logs, so that the store starts a fresh one. On a full disk
// (no space for the meta files) the logs stay, replayed in memory: they
// are returned, each with the replicas whose last record it holds, for
// the checkpointer to retire once there is room. A full disk never stops
// a store from opening.
func (s *Store) retireRecovered(logs []logFile) (uint64, []fullLog, error) {
	if len(logs) == 0 {
		return 0, nil, nil
	}
	newest := logs[len(logs)-1].gen
	err := s.checkpoint(s.snapshot())
	if noSpace(err) {
		glog.Warningf("blockstore: %s: no space to write the metas its meta logs hold (%v): serving them from memory until there is", s.dir, err)
		return newest, s.pendingLogs(logs), nil
	}
	if err != nil {
		return 0, nil, err
	}
	for _, l := range logs {
		if err := os.Remove(l.path); err != nil {
			return 0, nil, err
		}
	}
	if err := syncDir(filepath.Join(s.dir, logDir)); err != nil {
		return 0, nil, err
	}
	return newest, nil, nil
}

// pendingLogs returns logs as logs awaiting checkpoint, each with the
// replicas whose last record it holds and whose meta file is behind it.
func (s *Store) pendingLogs(logs []logFile) []fullLog {
	byGen := make(map[uint64][]*block)
	for _, b := range s.snapshot() {
		if b.mu.logged != nil {
			byGen[b.mu.gen] = append(byGen[b.mu.gen], b)
		}
	}
	out := make([]fullLog, len(logs))
	for i, l := range logs {
		out[i] = fullLog{gen: l.gen, blocks: byGen[l.gen]}
	}
	return out
}

// recoverDir loads the replicas of one fan-out directory. The last log
// record of a replica, if any, is its state. Otherwise a meta file makes
// a replica; a data file without meta was never synced, and a temporary
// meta is a rename that never happened: both are removed.
func (s *Store) recoverDir(dir string, logged map[BlockID]logRecord) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	metas := make(map[string]bool) // base name → has a meta file
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, tmpExt):
			err = os.Remove(filepath.Join(dir, name))
		case strings.HasSuffix(name, metaExt):
			metas[strings.TrimSuffix(name, metaExt)] = true
		case strings.HasSuffix(name, dataExt):
			if base := strings.TrimSuffix(name, dataExt); !metas[base] {
				metas[base] = false
			}
		}
		if err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(metas)) {
		base := filepath.Join(dir, name)
		rec, isLogged := s.loggedAt(logged, base)
		switch {
		case isLogged:
			delete(logged, rec.id)
			err = s.recoverLogged(base, rec)
		case metas[name]:
			err = s.recoverBlock(base)
		default:
			glog.Infof("blockstore: removing %s: never synced", base+dataExt)
			err = os.Remove(base + dataExt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loggedAt returns the last log record of the replica whose files are
// base.*, if the logs have one.
func (s *Store) loggedAt(logged map[BlockID]logRecord, base string) (logRecord, bool) {
	id, err := strconv.ParseUint(filepath.Base(base), 16, 64)
	if err != nil || s.base(BlockID(id)) != base {
		return logRecord{}, false
	}
	rec, ok := logged[BlockID(id)]
	return rec, ok
}

// recoverLogged loads the replica whose files are base.* at the state of
// its last log record: deleted, or the meta the record carries (which the
// meta file, if any, is older than). The meta file is written by the
// checkpoint that ends recovery.
func (s *Store) recoverLogged(base string, rec logRecord) error {
	if rec.kind == recDelete {
		return errors.Join(removeIfExists(base+metaExt), removeIfExists(base+dataExt))
	}
	m, crcs, err := decodeMeta(rec.body) // checked when read
	if err != nil {
		return err
	}
	if _, err := s.ensureDir(filepath.Dir(base)); err != nil {
		return err
	}
	if err := cutData(base+dataExt, m.size); err != nil {
		return err
	}
	b := s.register(m)
	b.mu.logged, b.mu.crcs, b.mu.gen = rec.body, crcs, rec.gen
	return nil
}

// recoverBlock loads the replica whose files are base.meta and base.data.
// A damaged meta header sets both files aside (suffix .corrupt) rather than
// guess; the block is then unknown here, and the nameserver re-replicates
// it from a healthy replica.
func (s *Store) recoverBlock(base string) error {
	m, err := readHeader(base + metaExt)
	if err == nil && fmt.Sprintf("%016x", uint64(m.id)) != filepath.Base(base) {
		err = fmt.Errorf("%w: meta of block %d in file %s", ErrCorrupt, m.id, base)
	}
	if errors.Is(err, ErrCorrupt) {
		glog.Errorf("blockstore: setting %s aside: %v", base, err)
		return errors.Join(os.Rename(base+metaExt, base+metaExt+".corrupt"),
			ignoreNotExist(os.Rename(base+dataExt, base+dataExt+".corrupt")))
	}
	if err != nil {
		return err
	}
	if err := cutData(base+dataExt, m.size); err != nil {
		return err
	}
	s.register(m)
	return nil
}

// register adds a recovered replica at the state m.
func (s *Store) register(m meta) *block {
	b := &block{id: m.id}
	b.mu.m, b.mu.durable, b.mu.exists = m, m.size, true
	s.mu.blocks[m.id] = b
	s.blockCount.Add(1)
	s.byteCount.Add(m.size)
	return b
}

func readHeader(path string) (meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return meta{}, err
	}
	defer f.Close()
	buf := make([]byte, headerSize)
	if _, err := io.ReadFull(f, buf); err != nil {
		return meta{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return decodeHeader(buf)
}

// cutData drops the bytes of a data file past its durable size: whatever
// they are, no sync vouched for them and no checksum covers them. A data
// file shorter than its meta says is left as it is; reads of the missing
// bytes fail with ErrCorrupt.
func cutData(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		glog.Errorf("blockstore: %s is missing", path)
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= size {
		return err
	}
	glog.Infof("blockstore: %s: dropping %d unsynced bytes past %d", path, st.Size()-size, size)
	if err := f.Truncate(size); err != nil {
		return err
	}
	return fdatasync(f)
}

func ignoreNotExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
