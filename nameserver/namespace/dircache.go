package namespace

import (
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// defaultDirCacheEntries bounds the directory cache: at about 100 bytes an
// entry, 256Ki directories cost some 25 MiB.
const defaultDirCacheEntries = 1 << 18

// dirCache remembers which entry id the key (parent id, name) of a
// directory holds, so that walking a path reads Pebble only for the
// components it has not seen. A metadata operation deep in a tree then
// costs one Pebble read (its leaf) instead of one per component.
//
// It caches only the binding of a key to a directory's entry id, which
// nothing changes but deleting the key: a rename deletes the old key, an
// overwrite deletes the file it replaces, a recursive delete deletes every
// key of the subtree. Lock state, mode and times change in place and are
// never cached; they are read from Pebble with the leaf.
//
// Coherence with the store: before a batch that deletes entry keys
// commits, forget drops them and marks them pending; once the commit is
// done, release unmarks them. So from before a delete can be seen in
// Pebble, lookups of its keys go to Pebble, and they never see from the
// cache anything older than what Pebble shows. Lookups run without path
// locks (Stat, List), so a lookup adds what it read from Pebble only if
// the key is not pending and no delete was released since before that
// read (gen): a binding read before a delete committed is never stored
// after it.
type dirCache struct {
	max int
	mu  struct {
		sync.RWMutex
		// gen counts released deletes.
		gen uint64
		ids map[dirKey]uint64
		// pending counts, per key, the deletes of it committing now;
		// rangeDeletes the range deletes committing now, which stand for
		// every key.
		pending      map[dirKey]int
		rangeDeletes int
	}
}

// dirKey is an entry key: the parent's entry id and the name.
type dirKey struct {
	parent uint64
	name   string
}

// forgotten is what forget took out of the cache, for release.
type forgotten struct {
	keys   []dirKey
	ranges int
}

func newDirCache(max int) *dirCache {
	c := &dirCache{max: max}
	c.mu.ids = make(map[dirKey]uint64)
	c.mu.pending = make(map[dirKey]int)
	return c
}

// reset forgets every binding; lookups under way fill nothing they read
// before it.
func (c *dirCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.ids = make(map[dirKey]uint64)
	c.mu.gen++
}

// resolve walks the directory path (normalized) from the root as far as
// the cache knows it. It returns the entry id of the deepest directory
// found, the rest of path below it ("" if it found all of it, else
// starting with "/"), and the generation to fill with.
func (c *dirCache) resolve(path string) (id uint64, rest string, gen uint64) {
	id, rest = RootID, path
	if path == "/" {
		rest = ""
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for rest != "" {
		name, next := nextComponent(rest)
		child, ok := c.mu.ids[dirKey{id, name}]
		if !ok {
			break
		}
		id, rest = child, next
	}
	return id, rest, c.mu.gen
}

// fill records that (parent, name) holds directory id, as read from
// Pebble after resolve returned gen, unless a delete of it is committing
// or one was released since.
func (c *dirCache) fill(gen, parent uint64, name string, id uint64) {
	k := dirKey{parent, name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.gen != gen || c.mu.pending[k] > 0 || c.mu.rangeDeletes > 0 {
		return
	}
	if _, ok := c.mu.ids[k]; ok {
		return
	}
	if len(c.mu.ids) >= c.max {
		for old := range c.mu.ids { // an arbitrary victim: map order is random
			delete(c.mu.ids, old)
			break
		}
	}
	k.name = strings.Clone(name) // do not pin the whole request path
	c.mu.ids[k] = id
}

// forget drops every entry key that b deletes (all of them if it deletes
// a range) and keeps them out until release. b must be complete and not
// yet committed; the caller calls release once the commit is done,
// whether it succeeded or not.
func (c *dirCache) forget(b *pebble.Batch) forgotten {
	var f forgotten
	r := b.Reader()
	for {
		kind, ukey, _, ok, err := r.Next()
		if !ok || err != nil {
			break // the batch is our own; the commit reports any damage
		}
		switch kind {
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
			if len(ukey) >= 9 && ukey[0] == prefixEntry {
				f.keys = append(f.keys, dirKey{decodeUint64(ukey[1:9]), string(ukey[9:])})
			}
		case pebble.InternalKeyKindRangeDelete:
			f.ranges++
		}
	}
	if len(f.keys) == 0 && f.ranges == 0 {
		return f
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range f.keys {
		delete(c.mu.ids, k)
		c.mu.pending[k]++
	}
	if f.ranges > 0 {
		clear(c.mu.ids)
		c.mu.rangeDeletes += f.ranges
	}
	return f
}

// release ends what forget began.
func (c *dirCache) release(f forgotten) {
	if len(f.keys) == 0 && f.ranges == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.gen++
	for _, k := range f.keys {
		if c.mu.pending[k]--; c.mu.pending[k] <= 0 {
			delete(c.mu.pending, k)
		}
	}
	c.mu.rangeDeletes -= f.ranges
}

// len returns the number of cached directories.
func (c *dirCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.mu.ids)
}

// nextComponent splits "/name/rest..." into name and "/rest..." ("" at the
// end).
func nextComponent(p string) (name, rest string) {
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// reader is the committed state as the apply step and the read methods see
// it: Pebble, with path lookups going through the directory cache.
type reader struct {
	pebble.Reader
	dirs *dirCache
}

// dirsOf returns the directory cache r looks paths up with, or nil if r is
// a bare Pebble reader.
func dirsOf(r pebble.Reader) *dirCache {
	if cr, ok := r.(*reader); ok {
		return cr.dirs
	}
	return nil
}
