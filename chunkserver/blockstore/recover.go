package blockstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/golang/glog"
)

// recover loads every replica under dir/blocks. It runs before the store
// is shared, so it takes no locks.
func (s *Store) recover() error {
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
			if err := s.recoverDir(dir); err != nil {
				return err
			}
			s.dirs.Store(dir, struct{}{})
		}
	}
	return nil
}

// recoverDir loads the replicas of one fan-out directory. A meta file
// makes a replica; a temporary meta is a rename that never happened and a
// data file without meta was never synced: both are removed.
func (s *Store) recoverDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	metas := make(map[string]bool)
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), metaExt); ok {
			metas[name] = true
		}
	}
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case strings.HasSuffix(name, tmpExt):
			err = os.Remove(path)
		case strings.HasSuffix(name, dataExt) && !metas[strings.TrimSuffix(name, dataExt)]:
			glog.Infof("blockstore: removing %s: never synced", path)
			err = os.Remove(path)
		case strings.HasSuffix(name, metaExt):
			err = s.recoverBlock(filepath.Join(dir, strings.TrimSuffix(name, metaExt)))
		}
		if err != nil {
			return err
		}
	}
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
	b := &block{id: m.id}
	b.mu.m, b.mu.durable, b.mu.exists = m, m.size, true
	s.mu.blocks[m.id] = b
	s.blockCount.Add(1)
	s.byteCount.Add(m.size)
	return nil
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
