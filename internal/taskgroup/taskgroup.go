// Package taskgroup runs the goroutines of one owner, which stops them
// all at once: Stop cancels their context, refuses new ones and waits for
// those still running.
//
// It is what a sync.WaitGroup alone does not give: a goroutine asked for
// after Stop began is refused rather than started behind Wait's back, so
// an owner that is closing never leaves one running.
package taskgroup

import (
	"context"
	"sync"
)

// Group is one owner's goroutines. The zero value is not usable; call New.
// All methods are safe for concurrent use.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// mu guards stopped, and orders every wg.Add before Stop's wg.Wait.
	mu struct {
		sync.Mutex
		stopped bool
	}
}

// New returns a running Group.
func New() *Group {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{ctx: ctx, cancel: cancel}
}

// Go runs fn in a new goroutine with the group's context, which ends when
// Stop is called. It reports false, and does not run fn, once the group is
// stopped.
func (g *Group) Go(fn func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.stopped {
		return false
	}
	g.wg.Go(func() { fn(g.ctx) })
	return true
}

// Context ends when the group is stopped.
func (g *Group) Context() context.Context { return g.ctx }

// Stop cancels the group's context, refuses new goroutines and waits for
// the running ones to return. It may be called more than once.
func (g *Group) Stop() {
	g.mu.Lock()
	g.mu.stopped = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}
