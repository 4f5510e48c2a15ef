package lockcmd

import (
	"context"
	"fmt"

	"github.com/bfs-go/bfs/sdk"
)

// fenceWatch watches a held lock for its loss, alongside the SDK's
// Lock.Done.
//
// Why: Lock.Done misses a forced unlock when the directory had no files
// open. The nameserver then goes LOCKED -> UNLOCKED in one step and
// publishes only the UNLOCKED event, which carries no epoch, while the
// SDK's watcher only accepts events naming the lock's epoch; the
// session stays alive, so nothing else closes Done. Here an UNLOCKED or
// CLEANING event for the path that names our epoch or no epoch, or a
// LOCKED event naming another epoch, counts as the loss. (An event about
// an older lock of the path cannot arrive: the watch starts after our
// grant, when the path was already ours.) Remove this once the SDK sees
// that transition itself.
type fenceWatch struct {
	lost   chan error // receives at most once
	cancel context.CancelFunc
	done   chan struct{}
}

func startFenceWatch(ctx context.Context, c *sdk.Client, l *sdk.Lock) *fenceWatch {
	ctx, cancel := context.WithCancel(ctx)
	f := &fenceWatch{lost: make(chan error, 1), cancel: cancel, done: make(chan struct{})}
	w, err := c.WatchDirLocks(ctx, l.Path())
	if err != nil {
		close(f.done) // Lock.Done still guards the session
		return f
	}
	go func() {
		defer close(f.done)
		defer w.Close()
		// A transition between the grant and the watch would be missed: look.
		if d, err := c.GetDirLock(ctx, l.Path()); err == nil && !held(d, l.Epoch()) {
			f.lost <- fmt.Errorf("%w: %s is %s", sdk.ErrLockLost, l.Path(), describe(d))
			return
		}
		f.run(w, l)
	}()
	return f
}

func (f *fenceWatch) run(w *sdk.LockWatch, l *sdk.Lock) {
	for {
		ev, err := w.Next()
		if err != nil {
			return // stopped, or the stream broke: Lock.Done still guards the session
		}
		if ev.Lock.Path == l.Path() && !held(&ev.Lock, l.Epoch()) {
			f.lost <- fmt.Errorf("%w: %s %s (%s)", sdk.ErrLockLost, l.Path(), ev.Lock.Status, ev.Reason)
			return
		}
	}
}

// held reports whether d still shows our lock at epoch: an event without
// an epoch is about whatever lock the path had, which was ours.
func held(d *sdk.DirLock, epoch uint64) bool {
	if d.Status == sdk.Locked {
		return d.Epoch == epoch
	}
	return d.Epoch != 0 && d.Epoch != epoch
}

func (f *fenceWatch) stop() {
	f.cancel()
	<-f.done
}
