package chunkserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// clusterIDFile, in the data directory, holds the id of the cluster the
// chunkserver joined at its first registration.
const clusterIDFile = "CLUSTER_ID"

// termFile, in the data directory, holds the newest Raft term of a
// nameserver leader the chunkserver has heard from.
const termFile = "LEADER_TERM"

// errWrongCluster is a nameserver of another cluster than the one the
// chunkserver joined.
var errWrongCluster = errors.New("wrong cluster")

// errStaleTerm is a command from a nameserver leader of an older term
// than the newest the chunkserver has heard from: a deposed leader.
var errStaleTerm = errors.New("stale leader term")

// cluster is the cluster the chunkserver belongs to, and the newest term
// of its nameserver group's leaders the chunkserver has heard of. The id
// is empty until the first registration and never changes afterwards;
// every word of the nameserver that destroys data (obsolete lists,
// deletes, truncates, seals, copies) is checked against it and against
// the term. Both are kept in the data directory, so a restart forgets
// neither. It is safe for concurrent use.
type cluster struct {
	dir string
	mu  struct {
		sync.Mutex
		id   string
		term uint64
	}
}

// loadCluster reads the id recorded in dir, if any.
func loadCluster(dir string) (*cluster, error) {
	c := &cluster{dir: dir}
	term, err := loadTerm(dir)
	if err != nil {
		return nil, err
	}
	c.mu.term = term
	b, err := os.ReadFile(filepath.Join(dir, clusterIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("chunkserver: read cluster id: %w", err)
	}
	c.mu.id = strings.TrimSpace(string(b))
	if c.mu.id == "" {
		return nil, fmt.Errorf("chunkserver: %s in %s is empty; remove it only if this chunkserver's blocks belong to no cluster", clusterIDFile, dir)
	}
	return c, nil
}

func loadTerm(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, termFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("chunkserver: read leader term: %w", err)
	}
	t, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("chunkserver: %s in %s holds %q, not a term: %w", termFile, dir, b, err)
	}
	return t, nil
}

// Term checks the term of a leader's word: one older than the newest
// heard of is refused (errStaleTerm); a newer one becomes the newest,
// durably, before the word is acted on.
func (c *cluster) Term(term uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case term < c.mu.term:
		return fmt.Errorf("%w: from a nameserver leader of term %d; a leader of term %d has spoken since: nothing done",
			errStaleTerm, term, c.mu.term)
	case term == c.mu.term:
		return nil
	}
	if err := writeFileSync(c.dir, termFile, []byte(strconv.FormatUint(term, 10)+"\n")); err != nil {
		return fmt.Errorf("chunkserver: record leader term: %w", err)
	}
	c.mu.term = term
	return nil
}

// ID returns the recorded id, "" before the first registration.
func (c *cluster) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.id
}

// Join records id at the first registration, durably, and afterwards
// checks that id is the one recorded.
func (c *cluster) Join(id string) error {
	if id == "" {
		return fmt.Errorf("%w: the nameserver sent no cluster id", errWrongCluster)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.id != "" {
		return c.checkLocked(id)
	}
	if err := writeFileSync(c.dir, clusterIDFile, []byte(id+"\n")); err != nil {
		return fmt.Errorf("chunkserver: record cluster id: %w", err)
	}
	c.mu.id = id
	return nil
}

// Check refuses an id other than the recorded one. Before the first
// registration nothing is recorded and nothing is refused: a chunkserver
// that never registered has no blocks of any cluster to protect.
func (c *cluster) Check(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.id == "" {
		return nil
	}
	return c.checkLocked(id)
}

func (c *cluster) checkLocked(id string) error {
	if id == c.mu.id {
		return nil
	}
	return fmt.Errorf("%w: this chunkserver belongs to cluster %s (%s in %s), the nameserver to cluster %q: "+
		"check the chunkserver's --nameserver address and the nameserver's --data directory; nothing is deleted",
		errWrongCluster, c.mu.id, clusterIDFile, c.dir, id)
}

// writeFileSync writes dir/name atomically: a temporary file, fsynced,
// renamed over name, and the directory fsynced.
func writeFileSync(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
