package chunkserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/volume"
)

// clusterIDFile, in the data directory, holds the id of the cluster the
// chunkserver joined at its first registration.
const clusterIDFile = "CLUSTER_ID"

// termFile, in every volume, holds the newest Raft term of a nameserver
// leader the chunkserver has heard from.
const termFile = "LEADER_TERM"

// errWrongCluster is a nameserver of another cluster than the one the
// chunkserver joined.
var errWrongCluster = errors.New("wrong cluster")

// errStaleTerm is a command from a nameserver leader of an older term
// than the newest the chunkserver has heard from: a deposed leader.
var errStaleTerm = errors.New("stale leader term")

// cluster is the cluster the chunkserver belongs to. It is empty until
// the first registration and never changes afterwards; every word of the
// nameserver that destroys data (obsolete lists, deletes, truncates) is
// checked against it. Every volume records it (CLUSTER_ID in its
// directory): a volume that names another cluster than the others is
// taken out of service (its blocks are another cluster's), and one that
// names none (a new disk) is given the id.
//
// It also keeps the newest term of the nameserver group's leaders the
// chunkserver has heard of (LEADER_TERM in every volume, the largest one
// read at start): every destructive word (deletes, truncates, seals,
// copies) of an older term is refused, so a deposed leader destroys
// nothing. It is safe for concurrent use.
type cluster struct {
	vols *volume.Set
	mu   struct {
		sync.Mutex
		id   string
		term uint64
	}
}

// loadCluster reads the id the volumes recorded, if any.
func loadCluster(vols *volume.Set) (*cluster, error) {
	c := &cluster{vols: vols}
	for _, v := range vols.Volumes() {
		if v.Failed() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(v.Dir(), clusterIDFile))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			err = fmt.Errorf("read cluster id: %w", err)
		}
		id := strings.TrimSpace(string(b))
		switch {
		case err != nil:
		case id == "":
			return nil, fmt.Errorf("chunkserver: %s in %s is empty; remove it only if this volume's blocks belong to no cluster", clusterIDFile, v.Dir())
		case c.mu.id == "":
			c.mu.id = id
		case id != c.mu.id:
			err = fmt.Errorf("%w: the volume belongs to cluster %s (%s in %s), the chunkserver's other volumes to %s; nothing on it is deleted",
				errWrongCluster, id, clusterIDFile, v.Dir(), c.mu.id)
		}
		if err != nil {
			if ferr := vols.Fail(v, err); ferr != nil {
				return nil, fmt.Errorf("chunkserver: %w", ferr)
			}
		}
	}
	if c.mu.id != "" {
		if err := c.recordLocked(); err != nil {
			return nil, err
		}
	}
	for _, v := range vols.Volumes() {
		if t, err := readTerm(v.Dir()); err != nil {
			glog.Warningf("chunkserver: volume %s: %v", v.Dir(), err)
		} else {
			c.mu.term = max(c.mu.term, t)
		}
	}
	return c, nil
}

func readTerm(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, termFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read leader term: %w", err)
	}
	t, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s in %s holds %q, not a term: %w", termFile, dir, b, err)
	}
	return t, nil
}

// Term checks the term of a leader's word: one older than the newest
// heard of is refused (errStaleTerm); a newer one becomes the newest,
// durably in every volume in service (in one at least), before the word
// is acted on.
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
	var errs []error
	held := 0
	for _, v := range c.vols.Volumes() {
		if v.Failed() {
			continue
		}
		if err := writeFileSync(v.Dir(), termFile, []byte(strconv.FormatUint(term, 10)+"\n")); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", v.Dir(), err))
			c.vols.Suspect(v)
			continue
		}
		held++
	}
	if held == 0 {
		return fmt.Errorf("chunkserver: record leader term: %w", errors.Join(errs...))
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
	c.mu.id = id
	if err := c.recordLocked(); err != nil {
		c.mu.id = ""
		return err
	}
	return nil
}

// recordLocked writes the id into every volume in service that lacks it.
// A volume that cannot take it is checked (it may be failing); it is an
// error only if no volume holds the id.
func (c *cluster) recordLocked() error {
	var errs []error
	held := 0
	for _, v := range c.vols.Volumes() {
		if v.Failed() {
			continue
		}
		path := filepath.Join(v.Dir(), clusterIDFile)
		if _, err := os.Stat(path); err == nil {
			held++
			continue
		}
		if err := writeFileSync(v.Dir(), clusterIDFile, []byte(c.mu.id+"\n")); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", v.Dir(), err))
			c.vols.Suspect(v)
			continue
		}
		held++
	}
	if held == 0 {
		return fmt.Errorf("chunkserver: record cluster id: %w", errors.Join(errs...))
	}
	for _, err := range errs {
		glog.Warningf("record cluster id: %v", err)
	}
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
	return fmt.Errorf("%w: this chunkserver belongs to cluster %s (%s in its data directories), the nameserver to cluster %q: "+
		"check the chunkserver's --nameserver address and the nameserver's --data directory; nothing is deleted",
		errWrongCluster, c.mu.id, clusterIDFile, id)
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
