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
//
// Which ends are the client's own the client decides from the calls it
// made, never from the reason the nameserver gives: an end its session
// watch reports is the client's release only while one of its releases
// of that directory or one above is in flight (releasing); every other
// end, whatever the event says (an unlock "by the holder" that another
// process with the session id made, a bug), keeps fencing it.
type fences struct {
	mu struct {
		sync.Mutex
		byPath map[string]fenceEntry
		// releasing counts, by path, the client's unlocks and deletes of
		// directories in flight.
		releasing map[string]int
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

// releasing notes a release of path (an unlock, a delete) about to be
// sent; done, called once its answer has been acted on (released or
// releasedWithin), forgets it.
func (f *fences) releasing(path string) (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.releasing == nil {
		f.mu.releasing = make(map[string]int)
	}
	f.mu.releasing[path]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.mu.releasing[path]--; f.mu.releasing[path] == 0 {
			delete(f.mu.releasing, path)
		}
	}
}

// ownEnd reports whether an end of the lock of path is the client's own
// release: one of its releases of path or of a directory above is in
// flight (an unlock ends the nested locks too, a delete every lock in
// the subtree).
func (f *fences) ownEnd(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range f.mu.releasing {
		if fspath.Within(path, p) {
			return true
		}
	}
	return false
}

// releasedWithin forgets the locks the client held at or under path: it
// deleted the directory, and them with it. Lost ones keep fencing.
func (f *fences) releasedWithin(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
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
