package blockstore

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/golang/glog"
)

const (
	// defaultLogLimit is the size past which the committer starts a new
	// log and hands the full one to the checkpointer.
	defaultLogLimit = 4 << 20
	// maxBatch bounds the records of one frame (one group commit); a
	// larger record goes alone.
	maxBatch = 1 << 20
)

// metaLog is the store's meta log. append hands it a record and returns
// once the record is durable. A committer goroutine writes every record
// pending as one frame and fdatasyncs the log once for all of them (group
// commit): concurrent syncs and seals share one flush. When a log is full
// the committer starts the next one, and a checkpointer goroutine writes
// the metas of the replicas the full log mentions into their meta files,
// then removes it.
type metaLog struct {
	dir   string
	limit int64
	hook  func(records int)
	// fault is TestingKnobs.Fault.
	fault func(op Op, path string) error
	// checkpoint writes the meta files of blocks (Store.checkpoint).
	checkpoint func(blocks []*block) error
	// retired is the newest generation whose log has been removed: a
	// replica whose last record is of a generation up to it has no record
	// left in any log.
	retired atomic.Uint64

	commitc, fullc, stopc chan struct{}
	wg                    sync.WaitGroup

	mu struct {
		sync.Mutex
		queue []*commit
		// err is sticky: once a write or fdatasync of the log failed,
		// nothing more is committed.
		err    error
		closed bool
		// full holds the logs awaiting checkpoint, oldest first.
		full []fullLog
	}

	// Owned by the committer goroutine while it runs, by close after.
	// f is nil while the log of gen could not be created for want of
	// space: the next commit tries again.
	f      *os.File
	gen    uint64
	size   int64
	blocks map[*block]struct{} // replicas with records in the current log
	frame  []byte
}

// commit is one record waiting for the committer.
type commit struct {
	b    *block
	rec  []byte
	gen  uint64
	err  error
	done chan struct{}
}

// fullLog is a log the committer has moved past.
type fullLog struct {
	gen    uint64
	blocks []*block
}

// openLog starts generation gen in dir and the log's goroutines. Every
// older generation is retired but those of pending, logs that recovery
// could not retire (no space to write the metas they hold), oldest
// first, which wait for the checkpointer. A disk with no room for the
// new log leaves it to be created by the first commit that finds room.
func openLog(dir string, gen uint64, o options, checkpoint func([]*block) error, pending []fullLog) (*metaLog, error) {
	l := &metaLog{
		dir: dir, limit: o.logLimit, hook: o.beforeFrame, fault: o.fault, checkpoint: checkpoint,
		commitc: make(chan struct{}, 1), fullc: make(chan struct{}, 1), stopc: make(chan struct{}),
		gen: gen, blocks: make(map[*block]struct{}),
	}
	l.retired.Store(gen - 1)
	if len(pending) > 0 {
		l.retired.Store(pending[0].gen - 1)
		l.mu.full = pending
	}
	if err := l.start(); err != nil && !noSpace(err) {
		return nil, err
	}
	l.wg.Add(2)
	go l.runCommitter()
	go l.runCheckpointer()
	if len(pending) > 0 {
		kick(l.fullc)
	}
	return l, nil
}

// start creates the log of l.gen.
func (l *metaLog) start() error {
	f, err := createLog(l.dir, l.gen)
	if err != nil {
		return fmt.Errorf("blockstore: new meta log: %w", err)
	}
	l.f, l.size = f, int64(len(logMagic))
	return nil
}

// append makes rec, a record about b, durable together with whatever
// other records are pending, and returns the generation of the log that
// holds it.
func (l *metaLog) append(b *block, rec []byte) (uint64, error) {
	if len(rec) > maxFrame {
		return 0, fmt.Errorf("blockstore: block %d: a record of %d bytes does not fit the meta log", b.id, len(rec))
	}
	c := &commit{b: b, rec: rec, done: make(chan struct{})}
	l.mu.Lock()
	switch {
	case l.mu.closed:
		l.mu.Unlock()
		return 0, ErrClosed
	case l.mu.err != nil:
		l.mu.Unlock()
		return 0, l.mu.err
	}
	l.mu.queue = append(l.mu.queue, c)
	l.mu.Unlock()
	kick(l.commitc)
	<-c.done
	return c.gen, c.err
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (l *metaLog) runCommitter() {
	defer l.wg.Done()
	for {
		select {
		case <-l.commitc:
			l.commitPending()
		case <-l.stopc:
			l.commitPending()
			return
		}
	}
}

// commitPending writes and syncs batches until nothing is queued.
func (l *metaLog) commitPending() {
	for {
		batch := l.take()
		if len(batch) == 0 {
			return
		}
		err := l.write(batch)
		for _, c := range batch {
			c.gen, c.err = l.gen, err
			close(c.done)
		}
		if err == nil && l.size >= l.limit {
			l.rotate()
		}
	}
}

// take removes from the queue the records of the next frame: at least
// one, and no more than maxBatch bytes.
func (l *metaLog) take() []*commit {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, bytes := 0, 0
	for n < len(l.mu.queue) && (n == 0 || bytes+len(l.mu.queue[n].rec) <= maxBatch) {
		bytes += len(l.mu.queue[n].rec)
		n++
	}
	batch := l.mu.queue[:n:n]
	if l.mu.queue = l.mu.queue[n:]; len(l.mu.queue) == 0 {
		l.mu.queue = nil
	}
	return batch
}

// write appends batch to the log as one frame and fdatasyncs it. A
// failure for want of space is undone (see undo) and not sticky; any
// other failure is.
func (l *metaLog) write(batch []*commit) error {
	if err := l.failed(); err != nil {
		return err
	}
	if l.f == nil {
		if err := l.start(); err != nil {
			if !noSpace(err) {
				l.fail(err)
			}
			return err
		}
	}
	if l.hook != nil {
		l.hook(len(batch))
	}
	frame := append(l.frame[:0], make([]byte, frameHeader)...)
	for _, c := range batch {
		frame = append(frame, c.rec...)
	}
	sealFrame(frame)
	if cap(frame) <= 2*maxBatch {
		l.frame = frame
	}
	if err := inject(l.fault, OpLogWrite, l.f.Name()); err != nil {
		return l.undo(err)
	}
	if _, err := l.f.Write(frame); err != nil {
		return l.undo(err)
	}
	if err := inject(l.fault, OpLogSync, l.f.Name()); err != nil {
		return l.undo(err)
	}
	if err := fdatasync(l.f); err != nil {
		return l.undo(err)
	}
	l.size += int64(len(frame))
	for _, c := range batch {
		l.blocks[c.b] = struct{}{}
	}
	return nil
}

// undo takes back a frame that did not become durable. For want of
// space (ENOSPC, EDQUOT) it cuts the log back to the end of its last
// durable frame and syncs that, so the next frame follows it and nothing
// acknowledged is lost: the disk only filled, and the store takes records
// again once space is freed. Any other failure (an I/O error: what the
// disk holds is unknown) is sticky.
func (l *metaLog) undo(err error) error {
	err = fmt.Errorf("blockstore: meta log: %w", err)
	if noSpace(err) {
		terr := l.f.Truncate(l.size)
		if terr == nil {
			terr = fdatasync(l.f)
		}
		if terr == nil {
			return err
		}
		err = fmt.Errorf("%w; cutting the log back: %w", err, terr)
	}
	l.fail(err)
	return err
}

// failed returns the sticky error, if any.
func (l *metaLog) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.err
}

func (l *metaLog) fail(err error) {
	glog.Errorf("%v: the store persists nothing more until it is reopened", err)
	l.mu.Lock()
	if l.mu.err == nil {
		l.mu.err = err
	}
	l.mu.Unlock()
}

// rotate starts the next log and queues the current one for checkpoint.
// With no space for the next log the current one grows on past its
// limit, and the next commit tries again.
func (l *metaLog) rotate() {
	f, err := createLog(l.dir, l.gen+1)
	if noSpace(err) {
		glog.Warningf("blockstore: meta log %d past its limit: no space for the next one: %v", l.gen, err)
		return
	}
	if err != nil {
		l.fail(fmt.Errorf("blockstore: new meta log: %w", err))
		return
	}
	if err := l.f.Close(); err != nil {
		glog.Warningf("blockstore: closing meta log %d: %v", l.gen, err)
	}
	full := fullLog{gen: l.gen, blocks: slices.Collect(maps.Keys(l.blocks))}
	l.f, l.gen, l.size, l.blocks = f, l.gen+1, int64(len(logMagic)), make(map[*block]struct{})
	l.mu.Lock()
	l.mu.full = append(l.mu.full, full)
	l.mu.Unlock()
	kick(l.fullc)
}

func (l *metaLog) runCheckpointer() {
	defer l.wg.Done()
	for {
		select {
		case <-l.fullc:
			if err := l.retireFull(); err != nil {
				glog.Errorf("blockstore: meta log checkpoint: %v; will retry", err)
			}
		case <-l.stopc:
			return
		}
	}
}

// retireFull checkpoints and removes the full logs, oldest first. After
// a failure the rest waits for the next full log, a Check, or Close.
func (l *metaLog) retireFull() error {
	for {
		l.mu.Lock()
		if len(l.mu.full) == 0 {
			l.mu.Unlock()
			return nil
		}
		fl := l.mu.full[0]
		l.mu.Unlock()
		if err := l.retire(fl); err != nil {
			return err
		}
		l.mu.Lock()
		l.mu.full = l.mu.full[1:]
		l.mu.Unlock()
	}
}

// retire removes the log of fl once the meta files hold what it says.
// The removal is made durable before the next log can go: a log that came
// back after a crash would replay records older than the meta files.
func (l *metaLog) retire(fl fullLog) error {
	if err := l.checkpoint(fl.blocks); err != nil {
		return err
	}
	if err := removeIfExists(filepath.Join(l.dir, logName(fl.gen))); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.retired.Store(fl.gen)
	return nil
}

// close stops the goroutines (the committer commits what is queued
// first), then checkpoints blocks, every replica of the store, and
// removes the logs: a store closed cleanly is all in its meta files. If
// that fails the logs stay, and the next Open replays them.
func (l *metaLog) close(blocks []*block) error {
	l.mu.Lock()
	l.mu.closed = true
	l.mu.Unlock()
	close(l.stopc)
	l.wg.Wait()
	var errs []error
	if l.f != nil {
		errs = append(errs, l.f.Close())
	}
	errs = append(errs, l.checkpoint(blocks))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logs, err := listLogs(l.dir)
	if err != nil {
		return err
	}
	for _, lf := range logs {
		if lf.gen <= l.gen {
			errs = append(errs, removeIfExists(lf.path))
		}
	}
	return errors.Join(append(errs, syncDir(l.dir))...)
}

// abandon stops the goroutines and closes the log, writing nothing: the
// logs stay for the next Open to replay.
func (l *metaLog) abandon() {
	l.mu.Lock()
	l.mu.closed = true
	l.mu.Unlock()
	close(l.stopc)
	l.wg.Wait()
	if l.f != nil {
		l.f.Close()
	}
}
