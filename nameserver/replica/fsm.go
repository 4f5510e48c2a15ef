package replica

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// fsm is the namespace as Raft's state machine. Raft calls ApplyBatch,
// Snapshot and Restore from one goroutine, never at once.
type fsm struct {
	store *namespace.Store
	// scratch is where checkpoints are made and snapshots unpacked.
	scratch string
	// fatal is told, once, of a storage failure; the node stops.
	fatal func(error)
	// failed is set by the first storage failure: nothing applies after
	// it, so this replica never goes on without a command it could not
	// apply.
	failed atomic.Bool
	// onApply, if set, is told of every batch applied (its entries and
	// how long it took), for metrics.
	onApply func(entries int, seconds float64)
	// seq numbers the scratch directories of this process.
	seq atomic.Uint64
}

var (
	_ raft.BatchingFSM = (*fsm)(nil)
	_ raft.FSMSnapshot = (*snapshot)(nil)
)

// applied is the response Propose gets back through Raft: what the
// command did, or why it did nothing.
type applied struct {
	res *namespace.Result
	err error
}

// errStopped answers the commands a replica stopped by a storage failure
// can no longer apply.
var errStopped = errors.New("replica stopped after a storage failure")

// ApplyBatch applies the commands of a batch of committed entries in
// order. An entry at or below the store's applied index was applied
// before a restart: skipped. Entries that are not commands (membership)
// change nothing here.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	start := time.Now()
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		out[i] = f.apply(l)
	}
	if f.onApply != nil {
		f.onApply(len(logs), time.Since(start).Seconds())
	}
	return out
}

// Apply applies one entry (Raft's FSM without batching; ApplyBatch is
// what Raft calls).
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *fsm) apply(l *raft.Log) *applied {
	if f.failed.Load() {
		return &applied{err: errStopped}
	}
	if l.Index <= f.store.AppliedIndex() {
		return &applied{err: namespace.ErrApplied}
	}
	cmd := &bfspb.Command{}
	if err := proto.Unmarshal(l.Data, cmd); err != nil {
		// The same bytes fail the same way on every replica.
		return &applied{err: fmt.Errorf("%w: command at index %d: %v", namespace.ErrInvalid, l.Index, err)}
	}
	res, err := f.store.Apply(l.Index, cmd)
	if namespace.IsStorageError(err) {
		f.stop(fmt.Errorf("apply of the command at index %d: %w", l.Index, err))
		return &applied{err: errStopped}
	}
	return &applied{res: res, err: err}
}

// stop stops applying for good and tells the owner.
func (f *fsm) stop(err error) {
	if f.failed.Swap(true) {
		return
	}
	glog.Errorf("replica: %v: this nameserver stops rather than diverge from its group", err)
	go f.fatal(err) // the owner shuts Raft down, which waits for this goroutine
}

// Snapshot checkpoints the store as of the last command applied. The
// checkpoint is quick (links, not copies); Persist streams it.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if f.failed.Load() {
		return nil, errStopped
	}
	dir := f.scratchDir("checkpoint")
	index, err := f.store.Checkpoint(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &snapshot{dir: dir, index: index}, nil
}

// Restore replaces the store's state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	dir := f.scratchDir("restore")
	defer os.RemoveAll(dir)
	if _, err := unpack(rc, dir); err != nil {
		return err
	}
	if err := f.store.Restore(dir); err != nil {
		return err
	}
	glog.Infof("replica: restored the namespace from a snapshot, applied through index %d", f.store.AppliedIndex())
	return nil
}

func (f *fsm) scratchDir(kind string) string {
	return filepath.Join(f.scratch, fmt.Sprintf("%s-%d-%d", kind, os.Getpid(), f.seq.Add(1)))
}

// snapshot is a checkpoint waiting to be written into a snapshot sink.
type snapshot struct {
	dir   string
	index uint64
	once  sync.Once
}

// The snapshot format: a tar stream whose first file, appliedName, holds
// the store's applied index in decimal, followed by the files of the
// Pebble checkpoint.
const appliedName = "APPLIED"

// Persist writes the checkpoint into sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := pack(sink, s.dir, s.index); err != nil {
		sink.Cancel()
		return fmt.Errorf("replica: write snapshot: %w", err)
	}
	return sink.Close()
}

// Release removes the checkpoint.
func (s *snapshot) Release() {
	s.once.Do(func() { os.RemoveAll(s.dir) })
}

// pack writes the applied index and the files of dir as a tar stream.
func pack(w io.Writer, dir string, index uint64) error {
	tw := tar.NewWriter(w)
	idx := []byte(strconv.FormatUint(index, 10))
	if err := tw.WriteHeader(&tar.Header{Name: appliedName, Mode: 0o600, Size: int64(len(idx))}); err != nil {
		return err
	}
	if _, err := tw.Write(idx); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("checkpoint holds %s, not a regular file", e.Name())
		}
		if err := packFile(tw, filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return tw.Close()
}

func packFile(tw *tar.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: filepath.Base(path), Mode: 0o600, Size: st.Size()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// unpack writes the files of a snapshot stream into dir (created) and
// returns the applied index it names. Names are plain file names: a
// stream naming anything else is refused.
func unpack(r io.Reader, dir string) (uint64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	index, err := readApplied(tar.NewReader(r), func(tr *tar.Reader, h *tar.Header) error {
		return unpackFile(tr, h, dir)
	})
	if err != nil {
		return 0, fmt.Errorf("replica: read snapshot: %w", err)
	}
	return index, nil
}

// readApplied reads a snapshot stream's applied index, then hands each
// following file to each (nil: stop after the index).
func readApplied(tr *tar.Reader, each func(*tar.Reader, *tar.Header) error) (uint64, error) {
	h, err := tr.Next()
	if err != nil {
		return 0, err
	}
	if h.Name != appliedName || h.Size > 20 {
		return 0, fmt.Errorf("snapshot starts with %q, not %s", h.Name, appliedName)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return 0, err
	}
	index, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("snapshot's applied index %q: %w", b, err)
	}
	for each != nil {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if err := each(tr, h); err != nil {
			return 0, err
		}
	}
	return index, nil
}

// snapshotApplied reads the applied index a snapshot stream starts with.
func snapshotApplied(r io.Reader) (uint64, error) {
	return readApplied(tar.NewReader(r), nil)
}

func unpackFile(tr *tar.Reader, h *tar.Header, dir string) error {
	name := h.Name
	if h.Typeflag != tar.TypeReg || name != filepath.Base(name) || name == "." || name == ".." || name == "" {
		return fmt.Errorf("snapshot holds %q, not a plain file", name)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, tr)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
