package session_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bfs-go/bfs/nameserver/session"
)

// openAs opens a session owned by owner and returns its error.
func (f *fixture) openAs(owner string) (session.Session, error) {
	s, err := f.m.Open(context.Background(), "h", time.Minute, owner)
	f.log.take()
	synctest.Wait()
	return s, err
}

func wantLimit(t *testing.T, err error, total bool) {
	t.Helper()
	var le *session.LimitError
	if !errors.As(err, &le) || !errors.Is(err, session.ErrLimit) || le.Total != total {
		t.Fatalf("Open: %v, want a *LimitError (total %v) wrapping ErrLimit", err, total)
	}
}

// TestLimitPerOwner: an owner holds at most MaxPerOwner sessions; a
// session that ends, by close or by expiry, makes room; other owners are
// not held back, and sessions recovered at start count.
func TestLimitPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		recovered := session.Session{ID: "0123", Holder: "h", TTL: time.Hour, Opened: epoch, Owner: "client/a"}
		f := newFixture(t, []session.Session{recovered}, func(c *session.Config) { c.MaxPerOwner = 3 })
		var a []session.Session
		for range 2 {
			s, err := f.openAs("client/a")
			if err != nil {
				t.Fatal(err)
			}
			a = append(a, s)
		}
		_, err := f.openAs("client/a")
		wantLimit(t, err, false)
		if _, err := f.openAs("client/b"); err != nil {
			t.Fatalf("another owner: %v", err)
		}
		if err := f.m.CloseSession(context.Background(), a[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.openAs("client/a"); err != nil {
			t.Fatalf("after a close: %v", err)
		}
		_, err = f.openAs("client/a")
		wantLimit(t, err, false)
		f.advance(time.Minute) // every session but the recovered one expires
		for range 2 {
			if _, err := f.openAs("client/a"); err != nil {
				t.Fatalf("after expiries: %v", err)
			}
		}
		_, err = f.openAs("client/a")
		wantLimit(t, err, false)
		// Sessions stored without an owner count only in the total.
		for range 4 {
			if _, err := f.openAs(""); err != nil {
				t.Fatalf("no owner: %v", err)
			}
		}
	})
}

// TestLimitTotal: every owner together holds at most MaxTotal sessions.
func TestLimitTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, func(c *session.Config) { c.MaxTotal = 2; c.MaxPerOwner = 5 })
		if _, err := f.openAs("client/a"); err != nil {
			t.Fatal(err)
		}
		s, err := f.openAs("client/b")
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.openAs("client/c")
		wantLimit(t, err, true)
		if err := f.m.CloseSession(context.Background(), s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.openAs("client/c"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLimitCountsOpensUnderWay: Opens waiting for their store count, so
// concurrent Opens cannot pass the limit together; a failed one gives
// its place back.
func TestLimitCountsOpensUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, func(c *session.Config) { c.MaxPerOwner = 1 })
		hold := make(chan struct{})
		f.store.onPut = func(session.Session) { <-hold }
		errc := make(chan error, 1)
		go func() {
			_, err := f.m.Open(context.Background(), "h", time.Minute, "client/a")
			errc <- err
		}()
		synctest.Wait() // the first Open waits in PutSession
		f.store.mu.Lock()
		f.store.onPut = nil
		f.store.mu.Unlock()
		_, err := f.m.Open(context.Background(), "h", time.Minute, "client/a")
		wantLimit(t, err, false)
		close(hold)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}

		f.store.mu.Lock()
		f.store.putErr = errors.New("disk on fire")
		f.store.mu.Unlock()
		if _, err := f.m.Open(context.Background(), "h", time.Minute, "client/b"); err == nil {
			t.Fatal("Open did not fail")
		}
		f.store.mu.Lock()
		f.store.putErr = nil
		f.store.mu.Unlock()
		if _, err := f.openAs("client/b"); err != nil {
			t.Fatalf("a failed Open kept its place: %v", err)
		}
	})
}
