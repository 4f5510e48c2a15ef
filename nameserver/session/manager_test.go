package session_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/nameserver/session"
)

// Manager tests run in a synctest bubble with a fake clock: the test moves
// time with Advance, and synctest.Wait returns once the expiry loop has
// done everything the move made due and is blocked again.

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// memStore is an in-memory Store. It appends what it does to a shared log.
// Like the nameserver's, its DeleteSession answers ErrNotFound for a
// session it does not hold.
type memStore struct {
	log *eventLog

	mu     sync.Mutex
	recs   map[session.ID]session.Session
	putErr error
	onPut  func(session.Session) // called before the record is stored
	// onDelete, if not nil, is called first by DeleteSession, without mu;
	// an error it returns is DeleteSession's, and nothing is deleted.
	onDelete func(ctx context.Context, id session.ID) error
	deletes  int
}

func (s *memStore) PutSession(_ context.Context, rec session.Session) error {
	s.mu.Lock()
	err, onPut := s.putErr, s.onPut
	s.mu.Unlock()
	if onPut != nil {
		onPut(rec)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[rec.ID] = rec
	s.log.add("put %s", rec.ID)
	return nil
}

func (s *memStore) DeleteSession(ctx context.Context, id session.ID) error {
	s.mu.Lock()
	s.deletes++
	onDelete := s.onDelete
	s.mu.Unlock()
	if onDelete != nil {
		if err := onDelete(ctx, id); err != nil {
			s.log.add("delete %s failed", id)
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recs[id]; !ok {
		s.log.add("delete %s not found", id)
		return fmt.Errorf("delete session %s: %w", id, session.ErrNotFound)
	}
	delete(s.recs, id)
	s.log.add("delete %s", id)
	return nil
}

// forget drops a record behind the Manager's back, as when the session's
// end was committed before (by an earlier leader).
func (s *memStore) forget(id session.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, id)
}

func (s *memStore) setOnDelete(f func(ctx context.Context, id session.ID) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDelete = f
}

func (s *memStore) deleteCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deletes
}

func (s *memStore) records() []session.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.SortedFunc(maps.Values(s.recs), func(a, b session.Session) int {
		return strings.Compare(string(a.ID), string(b.ID))
	})
}

func (s *memStore) has(id session.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.recs[id]
	return ok
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
}

// take returns the events since the last take.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

type fixture struct {
	t     *testing.T
	clock *clock.Fake
	store *memStore
	log   *eventLog
	m     *session.Manager
}

// newFixture starts a Manager on a fake clock and closes it when the test
// ends. edit, if not nil, may change the config first.
func newFixture(t *testing.T, recovered []session.Session, edit func(*session.Config)) *fixture {
	t.Helper()
	log := &eventLog{}
	f := &fixture{
		t:     t,
		clock: clock.NewFake(epoch),
		store: &memStore{log: log, recs: make(map[session.ID]session.Session)},
		log:   log,
	}
	for _, s := range recovered {
		f.store.recs[s.ID] = s
	}
	cfg := session.Config{
		Clock:  f.clock,
		Store:  f.store,
		MaxTTL: time.Hour,
		OnEnd: func(s session.Session, why session.EndReason) {
			// The end commits first: the Store holds no record of s by now.
			if f.store.has(s.ID) {
				t.Errorf("OnEnd(%s, %v) called while the Store still holds the session", s.ID, why)
			}
			log.add("end %s %v", s.ID, why)
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	m, err := session.NewManager(cfg, recovered)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	f.m = m
	t.Cleanup(m.Close)
	synctest.Wait()
	return f
}

func (f *fixture) open(holder string, ttl time.Duration) session.Session {
	f.t.Helper()
	s, err := f.m.Open(context.Background(), holder, ttl, "")
	if err != nil {
		f.t.Fatalf("Open(%q, %v): %v", holder, ttl, err)
	}
	f.log.take() // drop the put
	synctest.Wait()
	return s
}

// advance moves the clock and waits for the expiry loop to settle.
func (f *fixture) advance(d time.Duration) {
	f.clock.Advance(d)
	synctest.Wait()
}

func (f *fixture) wantEvents(want ...string) {
	f.t.Helper()
	if got := f.log.take(); !slices.Equal(got, want) {
		f.t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

func (f *fixture) wantLive(id session.ID, live bool) {
	f.t.Helper()
	if got := f.m.Valid(id); got != live {
		f.t.Fatalf("Valid(%s) = %v, want %v", id, got, live)
	}
	if _, got := f.m.Get(id); got != live {
		f.t.Fatalf("Get(%s) ok = %v, want %v", id, got, live)
	}
}

func TestOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		f.clock.Advance(time.Minute)
		// The record must be durable before the session exists.
		f.store.onPut = func(s session.Session) {
			if f.m.Valid(s.ID) {
				t.Errorf("session %s granted before PutSession returned", s.ID)
			}
		}
		s, err := f.m.Open(context.Background(), "tablet-7", 10*time.Second, "client/tablet")
		if err != nil {
			t.Fatal(err)
		}
		want := session.Session{ID: s.ID, Holder: "tablet-7", TTL: 10 * time.Second, Opened: epoch.Add(time.Minute), Owner: "client/tablet"}
		if s != want {
			t.Fatalf("Open = %+v, want %+v", s, want)
		}
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(string(s.ID)) {
			t.Fatalf("id %q is not 16 random bytes in hex", s.ID)
		}
		if recs := f.store.records(); !slices.Equal(recs, []session.Session{s}) {
			t.Fatalf("store = %+v, want the session", recs)
		}
		f.wantLive(s.ID, true)
		got := f.m.List()
		if len(got) != 1 || got[0].Session != s || got[0].Remaining != 10*time.Second {
			t.Fatalf("List = %+v", got)
		}

		s2 := f.open("tablet-7", 10*time.Second)
		if s2.ID == s.ID {
			t.Fatal("two sessions got the same id")
		}
	})
}

func TestOpenRefusesBadInput(t *testing.T) {
	tests := []struct {
		name   string
		holder string
		ttl    time.Duration
		want   error
	}{
		{"min ttl", "h", time.Second, nil},
		{"max ttl", "h", time.Hour, nil},
		{"longest holder", strings.Repeat("x", session.MaxHolderLen), time.Minute, nil},
		{"zero ttl", "h", 0, session.ErrInvalidTTL},
		{"negative ttl", "h", -time.Second, session.ErrInvalidTTL},
		{"below min", "h", time.Second - 1, session.ErrInvalidTTL},
		{"above max", "h", time.Hour + 1, session.ErrInvalidTTL},
		{"empty holder", "", time.Minute, session.ErrInvalidHolder},
		{"long holder", strings.Repeat("x", session.MaxHolderLen+1), time.Minute, session.ErrInvalidHolder},
		{"holder not utf-8", "\xff", time.Minute, session.ErrInvalidHolder},
		{"holder with spaces and letters", "tablet server é 9", time.Minute, nil},
		{"holder with terminal escapes", "evil\x1b[2K\r/tablet9 unlocked", time.Minute, session.ErrInvalidHolder},
		{"holder with a newline", "a\nb", time.Minute, session.ErrInvalidHolder},
		{"holder with a tab", "a\tb", time.Minute, session.ErrInvalidHolder},
		{"holder with DEL", "a\x7f", time.Minute, session.ErrInvalidHolder},
		{"holder with a direction override", "a\u202eb", time.Minute, session.ErrInvalidHolder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil, nil) // MaxTTL 1h, MinTTL default 1s
				s, err := f.m.Open(context.Background(), tc.holder, tc.ttl, "")
				if tc.want == nil {
					if err != nil {
						t.Fatalf("Open: %v", err)
					}
					f.wantLive(s.ID, true)
					return
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("Open = %v, want %v", err, tc.want)
				}
				if len(f.store.records()) != 0 || len(f.m.List()) != 0 {
					t.Fatal("a refused Open left a session behind")
				}
			})
		})
	}
}

func TestOpenStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		disk := errors.New("disk on fire")
		f.store.putErr = disk
		var tried session.ID
		f.store.onPut = func(s session.Session) { tried = s.ID }
		_, err := f.m.Open(context.Background(), "h", time.Minute, "")
		if !errors.Is(err, disk) {
			t.Fatalf("Open = %v, want the store's error", err)
		}
		f.wantLive(tried, false)
		if _, err := f.m.KeepAlive(tried); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("KeepAlive of the refused session = %v, want ErrNotFound", err)
		}
		if len(f.m.List()) != 0 {
			t.Fatal("List shows a session that was not persisted")
		}
		f.advance(time.Hour)
		f.wantEvents() // nothing to expire
	})
}

func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		a := f.open("a", 30*time.Second)
		b := f.open("b", 10*time.Second)
		c := f.open("c", 20*time.Second)

		f.advance(10*time.Second - 1)
		f.wantEvents()
		f.wantLive(b.ID, true)

		f.advance(1)
		f.wantEvents("delete "+string(b.ID), "end "+string(b.ID)+" expired")
		f.wantLive(b.ID, false)
		if _, err := f.m.KeepAlive(b.ID); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("KeepAlive after expiry = %v, want ErrNotFound", err)
		}

		// Both due at once: ended in deadline order, each end committed
		// before OnEnd.
		f.advance(time.Minute)
		f.wantEvents(
			"delete "+string(c.ID), "end "+string(c.ID)+" expired",
			"delete "+string(a.ID), "end "+string(a.ID)+" expired",
		)
		if recs := f.store.records(); len(recs) != 0 {
			t.Fatalf("store still holds %+v", recs)
		}
		if got := f.m.List(); len(got) != 0 {
			t.Fatalf("List = %+v", got)
		}
	})
}

func TestEarlierDeadlineWakesLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		long := f.open("long", time.Hour) // the loop now sleeps for an hour
		short := f.open("short", time.Second)
		f.advance(time.Second)
		f.wantEvents("delete "+string(short.ID), "end "+string(short.ID)+" expired")
		f.wantLive(long.ID, true)
	})
}

func TestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		const ttl = 9 * time.Second
		s := f.open("h", ttl)
		for i := range 30 { // ten TTLs
			f.advance(ttl / 3)
			got, err := f.m.KeepAlive(s.ID)
			if err != nil || got != ttl {
				t.Fatalf("keep-alive %d = %v, %v; want %v", i, got, err, ttl)
			}
		}
		f.wantEvents()
		f.wantLive(s.ID, true)
		if !f.store.has(s.ID) {
			t.Fatal("record of a live session is gone")
		}

		// Silence: it expires one TTL after the last keep-alive.
		f.advance(ttl - 1)
		f.wantEvents()
		f.advance(1)
		f.wantEvents("delete "+string(s.ID), "end "+string(s.ID)+" expired")
	})
}

func TestKeepAliveUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		if _, err := f.m.KeepAlive("nope"); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("KeepAlive = %v, want ErrNotFound", err)
		}
	})
}

// TestLateKeepAlive holds the expiry loop inside OnEnd of one session while
// another passes its deadline, so the second is expired but still in the
// table: a keep-alive for it must be refused, and it must end as expired.
func TestLateKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		f := newFixture(t, nil, func(c *session.Config) {
			onEnd := c.OnEnd
			c.OnEnd = func(s session.Session, why session.EndReason) {
				onEnd(s, why)
				if s.Holder == "blocker" {
					<-release
				}
			}
		})
		t.Cleanup(unblock) // before the fixture's Close, which waits for the loop

		blocker := f.open("blocker", time.Second)
		late := f.open("late", 2*time.Second)

		f.advance(time.Second) // the loop is now stuck in OnEnd(blocker)
		f.advance(time.Second) // late's deadline passes
		f.wantEvents("delete "+string(blocker.ID), "end "+string(blocker.ID)+" expired")

		if _, err := f.m.KeepAlive(late.ID); !errors.Is(err, session.ErrExpired) {
			t.Fatalf("late KeepAlive = %v, want ErrExpired", err)
		}
		f.wantLive(late.ID, false)
		if got := f.m.List(); len(got) != 0 {
			t.Fatalf("List shows expired sessions: %+v", got)
		}
		// Closing it now ends it, as expired.
		if err := f.m.CloseSession(context.Background(), late.ID); !errors.Is(err, session.ErrExpired) {
			t.Fatalf("CloseSession of an expired session = %v, want ErrExpired", err)
		}
		f.wantEvents("delete "+string(late.ID), "end "+string(late.ID)+" expired")

		unblock()
		synctest.Wait()
		f.wantEvents() // late is not ended twice
	})
}

func TestCloseSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		s := f.open("h", time.Minute)
		other := f.open("other", time.Minute)

		if err := f.m.CloseSession(context.Background(), s.ID); err != nil {
			t.Fatal(err)
		}
		f.wantEvents("delete "+string(s.ID), "end "+string(s.ID)+" closed")
		f.wantLive(s.ID, false)
		f.wantLive(other.ID, true)

		err := f.m.CloseSession(context.Background(), s.ID)
		if !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("second CloseSession = %v, want ErrNotFound", err)
		}
		f.advance(time.Hour)
		f.wantEvents("delete "+string(other.ID), "end "+string(other.ID)+" expired")
	})
}

// errDeposed stands for what the nameserver's Store answers once its
// leader is deposed (not leader, outcome unknown): the end is not known to
// be committed.
var errDeposed = errors.New("not the leader")

// failDeletes makes DeleteSession fail with err for the sessions in ids.
func failDeletes(err error, ids ...session.ID) func(context.Context, session.ID) error {
	return func(_ context.Context, id session.ID) error {
		if slices.Contains(ids, id) {
			return err
		}
		return nil
	}
}

// captureLog sends glog's output to a file until the test ends and returns
// a function reading what has been logged so far. Call it before
// newFixture, so that the Manager starts after the switch and is closed
// before the switch back.
func captureLog(t *testing.T) func() string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	toStderr := flag.Lookup("logtostderr")
	if toStderr == nil {
		t.Fatal("glog's -logtostderr flag is not registered")
	}
	prevFlag, prevStderr := toStderr.Value.String(), os.Stderr
	if err := toStderr.Value.Set("true"); err != nil {
		t.Fatal(err)
	}
	os.Stderr = file
	t.Cleanup(func() {
		os.Stderr = prevStderr
		if err := toStderr.Value.Set(prevFlag); err != nil {
			t.Error(err)
		}
		if err := file.Close(); err != nil {
			t.Error(err)
		}
	})
	return func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// wantUncommitted checks a session whose end did not commit: it is gone
// from the Manager, and its record stays in the Store for the next leader.
func (f *fixture) wantUncommitted(id session.ID) {
	f.t.Helper()
	f.wantLive(id, false)
	if _, err := f.m.KeepAlive(id); !errors.Is(err, session.ErrNotFound) {
		f.t.Fatalf("KeepAlive(%s) = %v, want ErrNotFound", id, err)
	}
	if !f.store.has(id) {
		f.t.Fatalf("the record of %s, whose end did not commit, is gone", id)
	}
}

// TestCloseSessionUncommittedEnd: a Store that cannot commit the end makes
// CloseSession fail and releases nothing. The session is gone from this
// Manager all the same; its record is the next leader's to end.
func TestCloseSessionUncommittedEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		s := f.open("h", time.Minute)
		other := f.open("other", time.Minute)
		f.store.setOnDelete(failDeletes(errDeposed, s.ID))

		if err := f.m.CloseSession(context.Background(), s.ID); !errors.Is(err, errDeposed) {
			t.Fatalf("CloseSession = %v, want the store's error", err)
		}
		f.wantEvents("delete " + string(s.ID) + " failed") // and no OnEnd
		f.wantUncommitted(s.ID)
		if err := f.m.CloseSession(context.Background(), s.ID); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("second CloseSession = %v, want ErrNotFound", err)
		}

		// Nor does this Manager end it later; the others end as before.
		f.advance(time.Hour)
		f.wantEvents("delete "+string(other.ID), "end "+string(other.ID)+" expired")
		if n := f.store.deleteCalls(); n != 2 {
			t.Fatalf("DeleteSession called %d times, want 2 (once per session)", n)
		}
	})
}

// TestExpiryUncommittedEnd: an expired session whose end the Store cannot
// commit gets no OnEnd; it is gone from the Manager, the failure is
// logged, and the loop goes on expiring the others.
func TestExpiryUncommittedEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logged := captureLog(t)
		f := newFixture(t, nil, nil)
		a := f.open("a", 10*time.Second)
		b := f.open("b", 20*time.Second)
		c := f.open("c", 30*time.Second)
		f.store.setOnDelete(failDeletes(errDeposed, a.ID))

		f.advance(20 * time.Second) // a and b are due at once, a first
		f.wantEvents("delete "+string(a.ID)+" failed", "delete "+string(b.ID), "end "+string(b.ID)+" expired")
		f.wantUncommitted(a.ID)
		if got := f.m.List(); len(got) != 1 || got[0].ID != c.ID {
			t.Fatalf("List = %+v, want only %s", got, c.ID)
		}
		log := logged()
		if !strings.Contains(log, string(a.ID)) || !strings.Contains(log, errDeposed.Error()) {
			t.Fatalf("the failed end of %s is not logged with its error; log:\n%s", a.ID, log)
		}

		f.advance(10 * time.Second)
		f.wantEvents("delete "+string(c.ID), "end "+string(c.ID)+" expired")
		f.advance(time.Hour)
		f.wantEvents() // a is not tried again
		if n := f.store.deleteCalls(); n != 3 {
			t.Fatalf("DeleteSession called %d times, want 3 (once per session)", n)
		}
	})
}

// TestEndAlreadyCommitted: a Store that no longer holds the session (its
// end was committed before, by an earlier leader) answers ErrNotFound, and
// OnEnd runs as for any committed end.
func TestEndAlreadyCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logged := captureLog(t)
		f := newFixture(t, nil, nil)
		closing := f.open("closing", time.Hour)
		expiring := f.open("expiring", time.Minute)
		f.store.forget(closing.ID)
		f.store.forget(expiring.ID)

		if err := f.m.CloseSession(context.Background(), closing.ID); err != nil {
			t.Fatalf("CloseSession = %v, want nil", err)
		}
		f.wantEvents("delete "+string(closing.ID)+" not found", "end "+string(closing.ID)+" closed")
		f.wantLive(closing.ID, false)

		f.advance(time.Minute)
		f.wantEvents("delete "+string(expiring.ID)+" not found", "end "+string(expiring.ID)+" expired")
		f.wantLive(expiring.ID, false)
		if log := logged(); strings.Contains(log, string(closing.ID)) || strings.Contains(log, string(expiring.ID)) {
			t.Fatalf("an end committed before was logged as a failure:\n%s", log)
		}
	})
}

// returnStore logs each DeleteSession when it has returned.
type returnStore struct{ *memStore }

func (s returnStore) DeleteSession(ctx context.Context, id session.ID) error {
	err := s.memStore.DeleteSession(ctx, id)
	s.log.add("delete %s returned", id)
	return err
}

// TestOnEndAfterCommit holds DeleteSession until the test lets it go:
// nothing of the session's end acts before it has returned, by expiry or
// by close.
func TestOnEndAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, func(c *session.Config) {
			c.Store = returnStore{c.Store.(*memStore)}
		})
		expiring := f.open("expiring", time.Minute)
		closing := f.open("closing", time.Hour)
		commit := make(chan struct{})
		f.store.setOnDelete(func(ctx context.Context, _ session.ID) error {
			select {
			case <-commit:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})

		f.advance(time.Minute) // the loop is now inside DeleteSession
		f.wantEvents()
		f.wantLive(expiring.ID, false)
		commit <- struct{}{}
		synctest.Wait()
		f.wantEvents(
			"delete "+string(expiring.ID),
			"delete "+string(expiring.ID)+" returned",
			"end "+string(expiring.ID)+" expired",
		)

		closed := make(chan error, 1)
		go func() { closed <- f.m.CloseSession(t.Context(), closing.ID) }()
		synctest.Wait() // CloseSession is now inside DeleteSession
		f.wantEvents()
		f.wantLive(closing.ID, false)
		commit <- struct{}{}
		if err := <-closed; err != nil {
			t.Fatalf("CloseSession = %v", err)
		}
		f.wantEvents(
			"delete "+string(closing.ID),
			"delete "+string(closing.ID)+" returned",
			"end "+string(closing.ID)+" closed",
		)
	})
}

// TestClosePendingEnd closes the Manager while the expiry loop waits on
// DeleteSession: the delete is cancelled, Close returns, and the session
// is not released.
func TestClosePendingEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		s := f.open("h", time.Minute)
		f.store.setOnDelete(func(ctx context.Context, _ session.ID) error {
			<-ctx.Done()
			return ctx.Err()
		})
		f.advance(time.Minute) // the loop is now inside DeleteSession
		f.m.Close()
		f.wantEvents("delete " + string(s.ID) + " failed") // and no OnEnd
		if !f.store.has(s.ID) {
			t.Fatalf("Close lost the record of %s, whose end did not commit", s.ID)
		}
	})
}

// TestRestartRefresh restarts a Manager on the same store: a session about
// to expire gets a whole TTL from the new Manager's clock.
func TestRestartRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newFixture(t, nil, nil)
		nearly := first.open("nearly", time.Minute)
		first.advance(time.Minute - time.Millisecond)
		fresh := first.open("fresh", 10*time.Second)
		first.m.Close() // as if the process died: the records stay
		first.wantEvents()

		recovered := first.store.records()
		second := newFixture(t, recovered, nil)
		got := second.m.List()
		want := []session.Info{
			{Session: nearly, Remaining: time.Minute},
			{Session: fresh, Remaining: 10 * time.Second},
		}
		slices.SortFunc(want, func(a, b session.Info) int { return strings.Compare(string(a.ID), string(b.ID)) })
		if !slices.Equal(got, want) {
			t.Fatalf("after restart List = %+v, want %+v", got, want)
		}

		second.advance(time.Minute - time.Millisecond)
		second.wantLive(nearly.ID, true)
		second.wantEvents("delete "+string(fresh.ID), "end "+string(fresh.ID)+" expired")
		second.advance(time.Millisecond)
		second.wantEvents("delete "+string(nearly.ID), "end "+string(nearly.ID)+" expired")
	})
}

// TestRecoveredSessionEndsAgain covers a session whose ending did not
// finish before a crash: it comes back, and ends again after its TTL.
func TestRecoveredSessionEndsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := session.Session{ID: "0123", Holder: "h", TTL: time.Second, Opened: epoch.Add(-time.Hour)}
		f := newFixture(t, []session.Session{s}, nil)
		f.wantLive(s.ID, true)
		f.advance(time.Second)
		f.wantEvents("delete 0123", "end 0123 expired")
	})
}

func TestNewManagerConfig(t *testing.T) {
	store := &memStore{recs: map[session.ID]session.Session{}}
	fake := clock.NewFake(epoch)
	tests := []struct {
		name string
		cfg  session.Config
	}{
		{"no clock", session.Config{Store: store}},
		{"no store", session.Config{Clock: fake}},
		{"negative min", session.Config{Clock: fake, Store: store, MinTTL: -1}},
		{"negative max", session.Config{Clock: fake, Store: store, MaxTTL: -1}},
		{"min above max", session.Config{Clock: fake, Store: store, MinTTL: time.Hour, MaxTTL: time.Minute}},
		{"min above default max", session.Config{Clock: fake, Store: store, MinTTL: time.Hour}},
		{"negative per owner", session.Config{Clock: fake, Store: store, MaxPerOwner: -1}},
		{"negative total", session.Config{Clock: fake, Store: store, MaxTotal: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := session.NewManager(tc.cfg, nil); err == nil {
				m.Close()
				t.Fatal("NewManager accepted a bad config")
			}
		})
	}
}

func TestDefaultTTLBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, func(c *session.Config) { c.MaxTTL = 0 })
		for ttl, want := range map[time.Duration]error{
			session.DefaultMinTTL:     nil,
			session.DefaultMaxTTL:     nil,
			session.DefaultMinTTL - 1: session.ErrInvalidTTL,
			session.DefaultMaxTTL + 1: session.ErrInvalidTTL,
		} {
			if _, err := f.m.Open(context.Background(), "h", ttl, ""); !errors.Is(err, want) || (err == nil) != (want == nil) {
				t.Errorf("Open(ttl %v) = %v, want %v", ttl, err, want)
			}
		}
	})
}

func TestDuplicateIDRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A broken Rand that returns the same bytes every time.
		f := newFixture(t, nil, func(c *session.Config) {
			c.Rand = repeatReader(0xab)
		})
		s := f.open("first", time.Minute)
		if want := session.ID(strings.Repeat("ab", 16)); s.ID != want {
			t.Fatalf("id = %s, want %s", s.ID, want)
		}
		if _, err := f.m.Open(context.Background(), "second", time.Hour, ""); err == nil {
			t.Fatal("Open reused a live session's id")
		}
		if recs := f.store.records(); !slices.Equal(recs, []session.Session{s}) {
			t.Fatalf("store = %+v, want only the first session", recs)
		}
	})
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	copy(p, bytes.Repeat([]byte{byte(r)}, len(p)))
	return len(p), nil
}

func TestAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, nil)
		s := f.open("h", time.Minute)
		f.m.Close()
		f.m.Close() // idempotent
		if _, err := f.m.Open(context.Background(), "h", time.Minute, ""); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("Open after Close = %v, want ErrClosed", err)
		}
		if _, err := f.m.KeepAlive(s.ID); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("KeepAlive after Close = %v, want ErrClosed", err)
		}
		if err := f.m.CloseSession(context.Background(), s.ID); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("CloseSession after Close = %v, want ErrClosed", err)
		}
		// The loop is gone: nothing ends, the record stays for the next start.
		f.advance(time.Hour)
		f.wantEvents()
		if !f.store.has(s.ID) {
			t.Fatal("Close lost a session's record")
		}
	})
}

// TestCloseStopsLoop uses the real clock, outside any bubble, and checks
// that Close leaves no goroutine behind.
func TestCloseStopsLoop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, err := session.NewManager(session.Config{
		Clock: clock.Real{},
		Store: &memStore{log: &eventLog{}, recs: map[session.ID]session.Session{}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(context.Background(), "h", time.Minute, ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.Close(); m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestConcurrentUse runs clients against the Manager while time moves, for
// the race detector: every session ends exactly once, and only sessions
// that were not kept alive expire.
func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			ended = map[session.ID]session.EndReason{}
		)
		f := newFixture(t, nil, func(c *session.Config) {
			c.OnEnd = func(s session.Session, why session.EndReason) {
				mu.Lock()
				defer mu.Unlock()
				if prev, ok := ended[s.ID]; ok {
					t.Errorf("%s ended twice: %v then %v", s.ID, prev, why)
				}
				ended[s.ID] = why
			}
		})
		const clients, ttl = 20, 3 * time.Second
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var closed, abandoned sync.Map
		for i := range clients {
			wg.Go(func() {
				s, err := f.m.Open(context.Background(), fmt.Sprint("client-", i), ttl, "")
				if err != nil {
					t.Error(err)
					return
				}
				tick := f.clock.NewTimer(ttl / 3)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-stop:
						if i%2 == 0 {
							closed.Store(s.ID, true)
							if err := f.m.CloseSession(context.Background(), s.ID); err != nil {
								t.Error(err)
							}
						} else {
							abandoned.Store(s.ID, true)
						}
						return
					case <-tick.C():
						if _, err := f.m.KeepAlive(s.ID); err != nil {
							t.Errorf("client %d keep-alive %d: %v", i, n, err)
							return
						}
						tick.Reset(ttl / 3)
					}
				}
			})
		}
		synctest.Wait()
		for range 30 {
			f.advance(ttl / 3)
		}
		close(stop)
		wg.Wait()
		f.advance(ttl)

		mu.Lock()
		defer mu.Unlock()
		if len(ended) != clients {
			t.Fatalf("%d sessions ended, want %d", len(ended), clients)
		}
		for id, why := range ended {
			_, wasClosed := closed.Load(id)
			_, wasAbandoned := abandoned.Load(id)
			if (why == session.Closed) != wasClosed || (why == session.Expired) != wasAbandoned {
				t.Errorf("%s ended %v; closed %v, abandoned %v", id, why, wasClosed, wasAbandoned)
			}
		}
		if recs := f.store.records(); len(recs) != 0 {
			t.Fatalf("store still holds %d sessions", len(recs))
		}
	})
}

func TestEndReasonString(t *testing.T) {
	for r, want := range map[session.EndReason]string{
		session.Closed:  "closed",
		session.Expired: "expired",
		0:               "EndReason(0)",
	} {
		if got := r.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(r), got, want)
		}
	}
}
