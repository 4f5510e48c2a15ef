package namespace

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/fspath"
)

// openIndex is the files open for write arranged by where they are, so
// that finding the ones in a subtree (what a lock or an unlock must
// drain) costs what it finds, not a pass over every open file of the
// namespace: an unlock of a directory with nothing open below it costs
// the same with a hundred thousand files open elsewhere as with none.
//
// It holds a node for every open file and for every directory with an
// open file somewhere below it; each node names its parent, and a
// directory's node the nodes right below it. A directory without a node
// has no open file below it. Renaming a directory moves its node, and so
// everything below it, at once.
//
// It mirrors two kinds of stored records: the open-file records ('w'
// keys) and where each entry is ('i' keys). Apply works out what a batch
// changes in it before the batch commits (changes), reading what it needs
// of the committed state, and applies that once the batch has committed
// (apply), still under the command's path locks; Open builds it from the
// records (load). A command that reads it for a directory holds that
// directory's path lock, and every command that opens, closes or moves a
// file below the directory holds a read lock on it, so the reader sees
// all of them that committed and none that did not.
type openIndex struct {
	mu struct {
		sync.Mutex
		nodes map[uint64]*openNode
	}
}

// openNode is an open file (writer set) or a directory leading to one.
type openNode struct {
	parent uint64 // 0 for the root
	writer string
	below  map[uint64]struct{}
}

// openChanges is what one batch changes in the index.
type openChanges struct {
	closed []uint64
	placed []placement
}

// placement puts an entry where it now is: a file opened (writer set),
// or the node of an entry that moved. chain is where: its parent first,
// up to the root.
type placement struct {
	id     uint64
	writer string
	chain  []uint64
}

// maxDepth bounds the directories above any entry: every component of a
// path takes at least two bytes.
const maxDepth = fspath.MaxLen / 2

func newOpenIndex() *openIndex {
	x := &openIndex{}
	x.mu.nodes = make(map[uint64]*openNode)
	return x
}

// under returns the files open for write in the subtree of directory dir
// whose writer keep accepts (all if keep is nil), in the order of their
// open-file keys (by writer session, then entry id): what the apply step
// records from them is the same wherever the same commands are applied.
func (x *openIndex) under(dir uint64, keep func(writer string) bool) []uint64 {
	var found []OpenFile
	x.mu.Lock()
	if x.mu.nodes[dir] != nil {
		for stack := []uint64{dir}; len(stack) > 0; {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			n := x.mu.nodes[id]
			if n == nil {
				continue
			}
			if n.writer != "" {
				if keep == nil || keep(n.writer) {
					found = append(found, OpenFile{Session: n.writer, EntryID: id})
				}
				continue
			}
			for c := range n.below {
				stack = append(stack, c)
			}
		}
	}
	x.mu.Unlock()
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(a, b OpenFile) int {
		return cmp.Or(cmp.Compare(len(a.Session), len(b.Session)), cmp.Compare(a.Session, b.Session), cmp.Compare(a.EntryID, b.EntryID))
	})
	ids := make([]uint64, len(found))
	for i, f := range found {
		ids[i] = f.EntryID
	}
	return ids
}

// changes works out what batch b, about to commit over the state r,
// changes in the index: the files it opens and closes (its open-file
// records), and where the ones it opens, and the nodes it moves, now are
// (its records of where entries are).
func (x *openIndex) changes(r pebble.Reader, b *pebble.Batch) (openChanges, error) {
	// Made when first needed: most batches open, close and move nothing.
	var writers map[uint64]string // by the last record of each file: "" if closed
	var parents map[uint64]uint64
	var files, moved []uint64
	for rd := b.Reader(); ; {
		kind, k, v, ok, err := rd.Next()
		if err != nil {
			return openChanges{}, fmt.Errorf("namespace: read batch: %w", err)
		}
		if !ok {
			break
		}
		switch {
		case len(k) > 2 && k[0] == prefixOpen:
			writer, id := openKeyEntry(k)
			if kind != pebble.InternalKeyKindSet {
				writer = ""
			}
			if _, seen := writers[id]; !seen {
				files = append(files, id)
			}
			if writers == nil {
				writers = make(map[uint64]string)
			}
			writers[id] = writer
		case len(k) == 9 && k[0] == prefixID && kind == pebble.InternalKeyKindSet && len(v) >= 8:
			id := decodeUint64(k[1:])
			if parents == nil {
				parents = make(map[uint64]uint64)
			}
			parents[id] = decodeUint64(v[:8])
			moved = append(moved, id)
		}
	}
	var ch openChanges
	for _, id := range files {
		if writers[id] == "" {
			ch.closed = append(ch.closed, id)
		} else if err := x.place(&ch, r, parents, id, writers[id]); err != nil {
			return openChanges{}, err
		}
	}
	for _, id := range moved {
		if _, file := writers[id]; file || !x.has(id) {
			continue // placed above, or nothing open at or below it
		}
		if err := x.place(&ch, r, parents, id, ""); err != nil {
			return openChanges{}, err
		}
	}
	return ch, nil
}

// place adds to ch the placement of entry id (writer set for a file
// opened), unless the index has it there already.
func (x *openIndex) place(ch *openChanges, r pebble.Reader, parents map[uint64]uint64, id uint64, writer string) error {
	parent, ok := parents[id]
	if !ok {
		var err error
		if parent, err = parentOf(r, id); err != nil {
			return err
		}
	}
	if x.placed(id, parent, writer) {
		return nil
	}
	chain, err := x.chain(r, parents, parent)
	if err != nil {
		return err
	}
	ch.placed = append(ch.placed, placement{id: id, writer: writer, chain: chain})
	return nil
}

// placed reports whether the index has id below parent already, as the
// file of writer if writer is set.
func (x *openIndex) placed(id, parent uint64, writer string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.mu.nodes[id]
	return n != nil && n.parent == parent && (writer == "" || n.writer == writer)
}

// has reports whether id has a node: an open file, or a directory with
// one below it.
func (x *openIndex) has(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mu.nodes[id] != nil
}

// chain returns directory dir and the directories above it, up to the
// root. Where they are comes from the batch (parents), the index or the
// committed state, in that order: the command's path locks keep them
// where they are, but not their nodes, which other commands may add or
// prune meanwhile; so the chain is copied out rather than trusted to be
// in the index when applied.
func (x *openIndex) chain(r pebble.Reader, parents map[uint64]uint64, dir uint64) ([]uint64, error) {
	var chain []uint64
	for cur := dir; ; {
		chain = append(chain, cur)
		if cur == RootID {
			return chain, nil
		}
		if len(chain) > maxDepth {
			return nil, fmt.Errorf("namespace: directory %d lies deeper than any path", dir)
		}
		if p, ok := parents[cur]; ok {
			cur = p
			continue
		}
		if up := x.ancestry(cur); up != nil {
			return append(chain, up...), nil
		}
		p, err := parentOf(r, cur)
		if err != nil {
			return nil, err
		}
		cur = p
	}
}

// ancestry returns the directories above id up to the root as the index
// has them; nil if id has no node.
func (x *openIndex) ancestry(id uint64) []uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.mu.nodes[id]
	if n == nil {
		return nil
	}
	var up []uint64
	for p := n.parent; ; {
		up = append(up, p)
		if p == RootID {
			return up
		}
		pn := x.mu.nodes[p]
		if pn == nil || len(up) > maxDepth {
			return nil // not linked up to the root: ask the store
		}
		p = pn.parent
	}
}

// parentOf reads the parent id of entry id.
func parentOf(r pebble.Reader, id uint64) (uint64, error) {
	v, closer, err := r.Get(idKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("namespace: entry %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	if len(v) < 8 {
		return 0, fmt.Errorf("namespace: corrupt location of entry %d", id)
	}
	return decodeUint64(v[:8]), nil
}

// apply makes the changes of a committed batch.
func (x *openIndex) apply(ch openChanges) {
	if len(ch.closed) == 0 && len(ch.placed) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range ch.closed {
		if n := x.mu.nodes[id]; n != nil {
			delete(x.mu.nodes, id)
			x.unlinkLocked(id, n.parent)
		}
	}
	for _, p := range ch.placed {
		x.placeLocked(p)
	}
}

func (x *openIndex) placeLocked(p placement) {
	n := x.mu.nodes[p.id]
	switch {
	case n == nil && p.writer == "":
		return // moved, with nothing open below it any more
	case n == nil:
		n = &openNode{}
		x.mu.nodes[p.id] = n
	default:
		x.unlinkLocked(p.id, n.parent)
	}
	if p.writer != "" {
		n.writer = p.writer
	}
	n.parent = p.chain[0]
	child := p.id
	for i, dir := range p.chain {
		if dn := x.mu.nodes[dir]; dn != nil {
			dn.below[child] = struct{}{}
			return // linked up to the root already
		}
		dn := &openNode{below: map[uint64]struct{}{child: {}}}
		if i+1 < len(p.chain) {
			dn.parent = p.chain[i+1]
		}
		x.mu.nodes[dir] = dn
		child = dir
	}
}

// unlinkLocked takes child out of parent's node, and drops the
// directories above that no longer lead to an open file.
func (x *openIndex) unlinkLocked(child, parent uint64) {
	for parent != 0 {
		n := x.mu.nodes[parent]
		if n == nil {
			return
		}
		delete(n.below, child)
		if len(n.below) > 0 || n.writer != "" {
			return
		}
		delete(x.mu.nodes, parent)
		child, parent = parent, n.parent
	}
}

// load builds the index from the stored open-file records. A record whose
// file is gone cannot be drained by anyone; it is logged and left out,
// as the scans before the index skipped it.
func (x *openIndex) load(r pebble.Reader) error {
	lower, upper := openBounds("")
	return scanKeys(r, lower, upper, func(k, _ []byte) error {
		writer, id := openKeyEntry(k)
		var ch openChanges
		err := x.place(&ch, r, nil, id, writer)
		if errors.Is(err, ErrNotFound) {
			glog.Errorf("namespace: file %d is recorded open for write by %s but is gone: %v", id, writer, err)
			return nil
		}
		if err != nil {
			return err
		}
		x.apply(ch) // before the next file: its chain starts from this one's
		return nil
	})
}

// reset forgets every node.
func (x *openIndex) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.mu.nodes = make(map[uint64]*openNode)
}

// len returns the number of nodes, files and directories.
func (x *openIndex) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.mu.nodes)
}
