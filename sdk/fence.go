package sdk

import (
	"sync"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// fences are the directory locks this client holds or has lost, by
// directory: the fencing tokens of SPEC §6. Every mutation the client
// sends carries the fences at or above the paths it names (and, for a
// mutation of a whole subtree, those below), and the nameserver accepts
// it only while each is still LOCKED at its epoch by the client's
// session. A lock that is taken away (forced, expired, its session lost)
// stays in the set, so the client's later mutations there are refused
// with ErrStaleEpoch, from any session, until it locks the directory (or
// one above it) again. A lock the client releases itself (Unlock,
// UnlockDir, deleting the directory) leaves the set.
type fences struct {
	mu struct {
		sync.Mutex
		byPath map[string]fenceEntry
	}
}

type fenceEntry struct {
	epoch uint64
	lost  bool
}

// granted records a lock of path at epoch. Lost locks below path are
// forgotten: the new lock covers them.
func (f *fences) granted(path string, epoch uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.byPath == nil {
		f.mu.byPath = make(map[string]fenceEntry)
	}
	for p, e := range f.mu.byPath {
		if e.lost && p != path && fspath.Within(p, path) {
			delete(f.mu.byPath, p)
		}
	}
	if e, ok := f.mu.byPath[path]; ok && !e.lost && e.epoch > epoch {
		return // an older grant's answer, arriving late
	}
	f.mu.byPath[path] = fenceEntry{epoch: epoch}
}

// lost records that the lock of path at epoch was taken away.
func (f *fences) lost(path string, epoch uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.mu.byPath[path]; ok && e.epoch == epoch {
		f.mu.byPath[path] = fenceEntry{epoch: epoch, lost: true}
	}
}

// released forgets path's lock at epoch (0: whatever epoch it has) and
// the locks below it, if the client still held it: it released them
// itself. Locks it had lost keep fencing: releasing a lock is no way to
// lift the fence of one taken away.
func (f *fences) released(path string, epoch uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.mu.byPath[path]; !ok || e.lost || (epoch != 0 && e.epoch != epoch) {
		return
	}
	for p, e := range f.mu.byPath {
		if !e.lost && fspath.Within(p, path) {
			delete(f.mu.byPath, p)
		}
	}
}

// of returns the fences a mutation of paths carries: those at or above
// each path, and with subtree those below it too.
func (f *fences) of(subtree bool, paths ...string) []*bfspb.Fence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.mu.byPath) == 0 {
		return nil
	}
	var out []*bfspb.Fence
	add := func(p string, e fenceEntry) {
		for _, have := range out {
			if have.Path == p {
				return
			}
		}
		out = append(out, &bfspb.Fence{Path: p, Epoch: e.epoch})
	}
	for _, target := range paths {
		for p := target; ; p = fspath.Dir(p) {
			if e, ok := f.mu.byPath[p]; ok {
				add(p, e)
			}
			if p == fspath.Root {
				break
			}
		}
		if !subtree {
			continue
		}
		for p, e := range f.mu.byPath {
			if p != target && fspath.Within(p, target) {
				add(p, e)
			}
		}
	}
	return out
}
