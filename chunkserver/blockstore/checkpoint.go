package blockstore

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// ckptParallel bounds the meta files a checkpoint writes at once.
const ckptParallel = 8

// ckptJob is one meta file a checkpoint writes.
type ckptJob struct {
	b   *block
	img []byte
	// installed is set once the meta file is renamed into place.
	installed bool
	err       error
}

// checkpoint writes the last logged meta of each of blocks into its meta
// file, so that the logs holding its records can go: the temporary files
// in parallel (each fdatasync'd), renamed over the meta files, then each
// directory fsync'd once. Only then does a replica count as checkpointed
// (its logged image is dropped, unless a newer record came meanwhile).
// It runs on one goroutine at a time: Open's, the checkpointer's, Close's.
func (s *Store) checkpoint(blocks []*block) error {
	jobs := s.ckptJobs(blocks)
	if len(jobs) == 0 {
		return nil
	}
	s.writeTmps(jobs)
	dirs := make(map[string]struct{})
	var errs []error
	for i := range jobs {
		j := &jobs[i]
		if j.err == nil {
			j.err = s.installMeta(j)
		}
		if j.err != nil {
			errs = append(errs, j.err)
		} else if j.installed {
			dirs[s.blockDir(j.b.id)] = struct{}{}
		}
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	for _, j := range jobs {
		if j.installed {
			j.b.mu.Lock()
			if sameImage(j.b.mu.logged, j.img) {
				j.b.mu.logged = nil
				if j.b.mu.f == nil {
					j.b.mu.crcs = nil
				}
			}
			j.b.mu.Unlock()
		}
	}
	if len(errs) > 1 {
		// A full disk fails every meta file alike: one says it for all.
		return fmt.Errorf("%d meta files not written, the first: %w", len(errs), errs[0])
	}
	return errors.Join(errs...)
}

// ckptJobs lists the replicas of blocks that have a logged meta, each id
// once: a replica deleted and created again since it was logged is the
// entry now in the map.
func (s *Store) ckptJobs(blocks []*block) []ckptJob {
	var jobs []ckptJob
	seen := make(map[BlockID]bool, len(blocks))
	for _, b := range blocks {
		if seen[b.id] || s.current(b.id) != b {
			continue
		}
		seen[b.id] = true
		b.mu.Lock()
		if b.mu.logged != nil && !b.mu.removed {
			jobs = append(jobs, ckptJob{b: b, img: b.mu.logged})
		}
		b.mu.Unlock()
	}
	return jobs
}

func (s *Store) current(id BlockID) *block {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.blocks[id]
}

// writeTmps writes the temporary meta file of every job, ckptParallel at
// a time, and returns when all are done.
func (s *Store) writeTmps(jobs []ckptJob) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(ckptParallel, len(jobs)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
				j := &jobs[i]
				j.err = writeSynced(s.base(j.b.id)+tmpExt, j.img)
			}
		})
	}
	wg.Wait()
}

// installMeta renames j's temporary meta file over the meta file, unless
// the replica was deleted meanwhile. It holds the replica's mutex, so a
// Delete cannot come between the check and the rename.
func (s *Store) installMeta(j *ckptJob) error {
	j.b.mu.Lock()
	defer j.b.mu.Unlock()
	base := s.base(j.b.id)
	if j.b.mu.removed {
		return removeIfExists(base + tmpExt)
	}
	if err := os.Rename(base+tmpExt, base+metaExt); err != nil {
		return err
	}
	j.installed = true
	return nil
}

// sameImage reports whether a and b are the same logged image (not merely
// equal bytes).
func sameImage(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}
