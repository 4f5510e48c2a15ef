// Package lockfill fills a nameserver with locked directories through its
// RPCs, the way a Tera cluster's tablet servers hold theirs: a number of
// sessions, each holding the locks of its own group of directories. The
// tests and benchmarks of listings at scale share it.
//
// Fill is safe to call from one goroutine; it runs its own workers and
// returns once they have all stopped.
package lockfill

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Spec says what to fill.
type Spec struct {
	// Root is the directory the locked directories go under.
	Root string
	// Locks is how many directories to lock.
	Locks int
	// Sessions is how many sessions hold them, each an equal share, in
	// contiguous groups (Path).
	Sessions int
	// Workers is how many RPCs are in flight at once.
	Workers int
	// History makes each directory locked, unlocked and locked again, so
	// that it also has one entry in its lock history.
	History bool
	// TTLMs is the sessions' TTL in milliseconds (0: ten minutes, the
	// nameserver's default longest); they are never kept alive.
	TTLMs int64
}

// Filled is what Fill made. Its sessions are kept alive until Stop or
// Release.
type Filled struct {
	Spec
	// SessionIDs are the sessions, by group.
	SessionIDs []string

	stopc    chan struct{}
	donec    chan struct{}
	stopOnce sync.Once
	// kept records the first failed keep-alive, read after donec.
	kept error
}

// Holder is the holder of group g's session.
func Holder(g int) string { return fmt.Sprintf("tablet-server-%03d", g) }

// Path is the i-th locked directory: Root/gGGG/tIIIIIII, group by
// session, so paths sort in the order of i.
func (f *Filled) Path(i int) string {
	return fmt.Sprintf("%s/g%03d/t%07d", f.Root, f.Group(i), i)
}

// Group is the group (and session) of the i-th directory.
func (f *Filled) Group(i int) int { return i / f.perSession() }

func (f *Filled) perSession() int { return (f.Locks + f.Sessions - 1) / f.Sessions }

// GroupDir is the directory of group g.
func (f *Filled) GroupDir(g int) string { return fmt.Sprintf("%s/g%03d", f.Root, g) }

// Fill opens spec.Sessions sessions and makes and locks spec.Locks
// directories with spec.Workers RPCs in flight. The sessions are kept
// alive (a million locks take longer than a TTL) until Stop or Release,
// which the caller calls; if Fill fails it stops them itself.
func Fill(ctx context.Context, ns bfspb.NameServerClient, spec Spec) (*Filled, error) {
	if spec.Locks < 1 || spec.Sessions < 1 || spec.Sessions > spec.Locks || spec.Workers < 1 {
		return nil, fmt.Errorf("lockfill: bad spec %+v", spec)
	}
	f := &Filled{Spec: spec, stopc: make(chan struct{}), donec: make(chan struct{})}
	if f.TTLMs == 0 {
		f.TTLMs = 600_000
	}
	for g := range spec.Sessions {
		open, err := ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: Holder(g), TtlMs: f.TTLMs})
		if err := check(open, err, "open session"); err != nil {
			close(f.donec)
			return nil, err
		}
		f.SessionIDs = append(f.SessionIDs, open.SessionId)
	}
	go f.keepAlive(ns)
	for g := range spec.Sessions {
		mk, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: f.GroupDir(g), Parents: true})
		if err := check(mk, err, "mkdir "+f.GroupDir(g)); err != nil {
			f.Stop()
			return nil, err
		}
	}
	if err := f.run(ctx, ns); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

// keepAlive renews the sessions every third of their TTL until Stop.
func (f *Filled) keepAlive(ns bfspb.NameServerClient) {
	defer close(f.donec)
	tick := time.NewTicker(time.Duration(f.TTLMs) * time.Millisecond / 3)
	defer tick.Stop()
	for {
		select {
		case <-f.stopc:
			return
		case <-tick.C:
		}
		for _, id := range f.SessionIDs {
			ka, err := ns.KeepAlive(context.Background(), &bfspb.KeepAliveRequest{SessionId: id})
			if err := check(ka, err, "keep-alive"); err != nil && f.kept == nil {
				f.kept = err
			}
		}
	}
}

// Stop stops keeping the sessions alive and reports the first keep-alive
// that failed. It is safe to call more than once.
func (f *Filled) Stop() error {
	f.stopOnce.Do(func() { close(f.stopc) })
	<-f.donec
	return f.kept
}

// run makes and locks every directory, spread over the workers.
func (f *Filled) run(ctx context.Context, ns bfspb.NameServerClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range f.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < f.Locks; i = int(next.Add(1) - 1) {
				if err := f.one(ctx, ns, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// one makes and locks the i-th directory.
func (f *Filled) one(ctx context.Context, ns bfspb.NameServerClient, i int) error {
	p, sid := f.Path(i), f.SessionIDs[f.Group(i)]
	mk, err := ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: p})
	if err := check(mk, err, "mkdir "+p); err != nil {
		return err
	}
	lock := func() error {
		lk, err := ns.LockDir(ctx, &bfspb.LockDirRequest{Path: p, SessionId: sid})
		return check(lk, err, "lock "+p)
	}
	if err := lock(); err != nil || !f.History {
		return err
	}
	un, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: p, SessionId: sid})
	if err == nil && un.Status == bfspb.StatusCode_UNLOCKED {
		return lock()
	}
	return check(un, err, "unlock "+p)
}

type response interface {
	GetStatus() bfspb.StatusCode
	GetMessage() string
}

func check(r response, err error, what string) error {
	switch {
	case err != nil:
		return fmt.Errorf("lockfill: %s: %w", what, err)
	case r.GetStatus() != bfspb.StatusCode_OK:
		return fmt.Errorf("lockfill: %s: %v %s", what, r.GetStatus(), r.GetMessage())
	}
	return nil
}

// Release stops the keep-alives and closes the sessions Fill opened,
// which releases their locks (the nameserver cleans them in the
// background), and waits until no lock under Root is left.
func (f *Filled) Release(ctx context.Context, ns bfspb.NameServerClient) error {
	if err := f.Stop(); err != nil {
		return err
	}
	for _, id := range f.SessionIDs {
		cl, err := ns.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: id})
		if err := check(cl, err, "close session"); err != nil {
			return err
		}
	}
	for {
		list, err := ns.ListDirLocks(ctx, &bfspb.ListDirLocksRequest{Prefix: f.Root, PageSize: 1})
		if err := check(list, err, "list locks"); err != nil {
			return err
		}
		if len(list.Locks) == 0 && list.NextPageToken == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lockfill: locks under %s still held: %w", f.Root, ctx.Err())
		case <-time.After(50 * time.Millisecond): // the nameserver offers no event to wait on
		}
	}
}
