package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/clock"
)

// MaxHolderLen is the longest holder name Open accepts, in bytes.
const MaxHolderLen = 255

// Default TTL bounds, used when Config leaves them zero.
const (
	DefaultMinTTL = time.Second
	DefaultMaxTTL = 10 * time.Minute
)

// Store persists sessions so they survive a restart. Implementations must be
// safe for concurrent use.
type Store interface {
	// PutSession records s; it must be durable when PutSession returns.
	PutSession(ctx context.Context, s Session) error
	// DeleteSession ends session id in the Store: once it returns nil the
	// session's end is committed, and nothing more of the session is
	// accepted. If the Store no longer holds the session (its end was
	// committed before), it returns an error matching ErrNotFound. Any
	// other error means the end may not be committed.
	DeleteSession(ctx context.Context, id ID) error
}

// Config configures a Manager.
type Config struct {
	Clock clock.Clock // required
	Store Store       // required
	// MinTTL and MaxTTL bound the TTL a client may ask for; zero means
	// DefaultMinTTL and DefaultMaxTTL.
	MinTTL, MaxTTL time.Duration
	// OnEnd, if not nil, is called once for each session that ends, after
	// it has left the table and its end is committed in the Store (or the
	// Store no longer held it), never with the Manager's mutex held. Calls
	// for expired sessions come one at a time from the expiry goroutine,
	// which waits for each to return; calls for closed sessions come from
	// CloseSession's caller.
	OnEnd func(s Session, why EndReason)
	// Rand is read for session ids; crypto/rand.Reader if nil. Reads are
	// serialized, so it need not be safe for concurrent use.
	Rand io.Reader
	// MaxPerOwner bounds the sessions one owner holds, MaxTotal those
	// of every owner together: Open refuses one more with a
	// *LimitError. Sessions recovered at start count, and may be more.
	// Sessions without an owner (stored before owners were) count only
	// in the total. Zero means no bound.
	MaxPerOwner, MaxTotal int
}

// Manager owns the session Table: it validates requests, persists sessions
// through Store, and runs the one goroutine that expires them. See the
// package documentation for its contract.
type Manager struct {
	clock  clock.Clock
	store  Store
	minTTL time.Duration
	maxTTL time.Duration
	onEnd  func(Session, EndReason)
	// Bounds of Open (Config.MaxPerOwner, MaxTotal).
	maxPerOwner, maxTotal int

	rand struct {
		sync.Mutex
		r io.Reader
	}

	// mu guards the table and closed. It is never held across a Store
	// call or OnEnd.
	mu struct {
		sync.Mutex
		table  *Table
		closed bool
		// opening counts the Opens under way, by owner (total: all),
		// which the limits count as sessions already.
		opening      map[string]int
		openingTotal int
	}

	rearmc    chan struct{} // buffered(1): an earlier deadline was granted
	stopc     chan struct{} // closed by Close to stop the expiry loop
	donec     chan struct{} // closed by the expiry loop when it returns
	cancel    context.CancelFunc
	closeOnce sync.Once
}

// NewManager returns a Manager holding the recovered sessions, typically
// everything the Store held at startup, and starts its expiry goroutine.
// Each recovered session gets a full TTL from cfg.Clock.Now(), however close
// to its deadline it was before the restart: deadlines are not persisted,
// and the holder must be given the chance to reach the new process.
// Recovered sessions are taken as they are, not checked against the TTL
// bounds: they were valid when opened.
func NewManager(cfg Config, recovered []Session) (*Manager, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		clock:  cfg.Clock,
		store:  cfg.Store,
		minTTL: cfg.MinTTL,
		maxTTL: cfg.MaxTTL,
		onEnd:  cfg.OnEnd,
		rearmc: make(chan struct{}, 1),
		// Bounds.
		maxPerOwner: cfg.MaxPerOwner,
		maxTotal:    cfg.MaxTotal,
		stopc:       make(chan struct{}),
		donec:       make(chan struct{}),
		cancel:      cancel,
	}
	m.rand.r = cfg.Rand
	m.mu.table = NewTable()
	m.mu.opening = make(map[string]int)
	now := m.clock.Now()
	for _, s := range recovered {
		m.mu.table.Grant(s, now)
	}
	go m.run(ctx)
	return m, nil
}

func (c *Config) fill() error {
	switch {
	case c.Clock == nil:
		return errors.New("session: Config.Clock is required")
	case c.Store == nil:
		return errors.New("session: Config.Store is required")
	case c.MinTTL < 0 || c.MaxTTL < 0:
		return fmt.Errorf("session: negative TTL bound (MinTTL %v, MaxTTL %v)", c.MinTTL, c.MaxTTL)
	case c.MaxPerOwner < 0 || c.MaxTotal < 0:
		return fmt.Errorf("session: negative session bound (MaxPerOwner %d, MaxTotal %d)", c.MaxPerOwner, c.MaxTotal)
	}
	if c.MinTTL == 0 {
		c.MinTTL = DefaultMinTTL
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = DefaultMaxTTL
	}
	if c.MinTTL > c.MaxTTL {
		return fmt.Errorf("session: MinTTL %v is above MaxTTL %v", c.MinTTL, c.MaxTTL)
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	return nil
}

// Open starts a session for holder, owned by owner, that lives ttl past
// each keep-alive. The session is durable in the Store before it is
// granted and returned; if the Store fails, no session exists and the
// error is returned.
func (m *Manager) Open(ctx context.Context, holder string, ttl time.Duration, owner string) (Session, error) {
	if err := m.validate(holder, ttl); err != nil {
		return Session{}, err
	}
	release, err := m.reserve(owner)
	if err != nil {
		return Session{}, err
	}
	defer release()
	id, err := m.newID()
	if err != nil {
		return Session{}, err
	}
	// Opened drops the monotonic reading: it is display only, and this way
	// it compares equal to what a Store gives back.
	s := Session{ID: id, Holder: holder, TTL: ttl, Opened: m.clock.Now().Round(0), Owner: owner}
	if err := m.store.PutSession(ctx, s); err != nil {
		return Session{}, fmt.Errorf("open session for %q: persist: %w", holder, err)
	}
	if err := m.grant(s); err != nil {
		// Closed while persisting: the record is recovered at the next
		// start and expires there unless the holder keeps it alive.
		return Session{}, err
	}
	return s, nil
}

// reserve counts an Open of owner under way against the limits, or
// refuses it; release ends the count once the session is granted (it
// counts in the table then) or was not.
func (m *Manager) reserve(owner string) (release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.mu.closed:
		return nil, ErrClosed
	case m.maxPerOwner > 0 && owner != "" && m.mu.table.Owned(owner)+m.mu.opening[owner] >= m.maxPerOwner:
		return nil, &LimitError{Owner: owner, Max: m.maxPerOwner}
	case m.maxTotal > 0 && m.mu.table.Len()+m.mu.openingTotal >= m.maxTotal:
		return nil, &LimitError{Owner: owner, Total: true, Max: m.maxTotal}
	}
	m.mu.opening[owner]++
	m.mu.openingTotal++
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.mu.opening[owner]--; m.mu.opening[owner] == 0 {
			delete(m.mu.opening, owner)
		}
		m.mu.openingTotal--
	}, nil
}

func (m *Manager) validate(holder string, ttl time.Duration) error {
	if ttl < m.minTTL || ttl > m.maxTTL {
		return fmt.Errorf("session ttl %v is outside [%v, %v]: %w", ttl, m.minTTL, m.maxTTL, ErrInvalidTTL)
	}
	return CheckHolder(holder)
}

// CheckHolder accepts a holder name (of a session, or of an operator
// lock) that is 1 to MaxHolderLen bytes of UTF-8 text made of printable
// characters (letters, marks, numbers, punctuation, symbols and the ASCII
// space): holders are shown in listings, and one with control or format
// characters could rewrite what a terminal shows around it. The error
// wraps ErrInvalidHolder.
func CheckHolder(holder string) error {
	switch {
	case holder == "":
		return fmt.Errorf("empty holder: %w", ErrInvalidHolder)
	case len(holder) > MaxHolderLen:
		return fmt.Errorf("holder is %d bytes, more than %d: %w", len(holder), MaxHolderLen, ErrInvalidHolder)
	case !utf8.ValidString(holder):
		return fmt.Errorf("holder %q is not valid UTF-8: %w", holder, ErrInvalidHolder)
	}
	for i, r := range holder {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("holder %q has the unprintable character %U at byte %d: %w", holder, r, i, ErrInvalidHolder)
		}
	}
	return nil
}

func (m *Manager) newID() (ID, error) {
	var b [16]byte
	m.rand.Lock()
	_, err := io.ReadFull(m.rand.r, b[:])
	m.rand.Unlock()
	if err != nil {
		return "", fmt.Errorf("session id: read random bytes: %w", err)
	}
	id := ID(hex.EncodeToString(b[:]))
	m.mu.Lock()
	defer m.mu.Unlock()
	// With 128 random bits this only happens if Rand is broken; better to
	// refuse than to overwrite someone else's session in the Store.
	if _, _, ok := m.mu.table.Get(id); ok {
		return "", fmt.Errorf("session id %s already in use: Rand is not random", id)
	}
	return id, nil
}

// grant adds s to the table and wakes the expiry loop if s now has the
// earliest deadline.
func (m *Manager) grant(s Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	prev, ok := m.mu.table.NextDeadline()
	now := m.clock.Now()
	m.mu.table.Grant(s, now)
	if !ok || now.Add(s.TTL).Before(prev) {
		select {
		case m.rearmc <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return nil
}

// KeepAlive renews session id for another TTL and returns that TTL. It
// fails with ErrNotFound for an unknown session and with ErrExpired for one
// whose deadline has passed, even if it has not been ended yet.
func (m *Manager) KeepAlive(id ID) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return 0, ErrClosed
	}
	return m.mu.table.Renew(id, m.clock.Now())
}

// CloseSession ends session id: it leaves the table, its end is
// committed in the Store, then OnEnd is called with Closed. A session
// whose deadline has already passed is ended as Expired instead and
// ErrExpired is returned. If the Store cannot commit the end, the error
// is returned and OnEnd is not called: the session is gone from this
// Manager, and its record, still in the Store, is the next Manager's to
// end (a new leader gives it a full TTL).
func (m *Manager) CloseSession(ctx context.Context, id ID) error {
	s, why, err := m.revoke(id)
	if err != nil {
		return err
	}
	if err := m.commitEnd(ctx, s, why); err != nil {
		return fmt.Errorf("close session %s: %w", id, err)
	}
	if why == Expired {
		return fmt.Errorf("close session %s: %w", id, ErrExpired)
	}
	return nil
}

// commitEnd commits the end of s, then calls OnEnd. A Store that no
// longer holds s had its end committed already: OnEnd, which is safe to
// repeat, runs all the same.
func (m *Manager) commitEnd(ctx context.Context, s Session, why EndReason) error {
	if err := m.store.DeleteSession(ctx, s.ID); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	m.end(s, why)
	return nil
}

func (m *Manager) revoke(id ID) (Session, EndReason, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return Session{}, 0, ErrClosed
	}
	_, deadline, ok := m.mu.table.Get(id)
	if !ok {
		return Session{}, 0, fmt.Errorf("close session %s: %w", id, ErrNotFound)
	}
	why := Closed
	if !m.clock.Now().Before(deadline) {
		why = Expired
	}
	s, _ := m.mu.table.Revoke(id)
	return s, why, nil
}

// Valid reports whether session id is known and not past its deadline.
func (m *Manager) Valid(id ID) bool {
	_, ok := m.Get(id)
	return ok
}

// Get returns session id if it is known and not past its deadline.
func (m *Manager) Get(id ID) (Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, deadline, ok := m.mu.table.Get(id)
	if !ok || !m.clock.Now().Before(deadline) {
		return Session{}, false
	}
	return s, true
}

// List returns the live sessions, sorted by ID.
func (m *Manager) List() []Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.table.List(m.clock.Now())
}

// Page returns one page of the live sessions; see Table.Page.
func (m *Manager) Page(after ID, limit int, holder string) ([]Info, ID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.table.Page(after, limit, holder, m.clock.Now())
}

// Close stops the expiry goroutine and waits for it to return; a Store
// delete it has in flight is cancelled. Sessions are left as they are: their
// records stay in the Store for the next start. After Close, Open,
// KeepAlive and CloseSession return ErrClosed. Close is idempotent.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.mu.closed = true
		m.mu.Unlock()
		close(m.stopc)
		m.cancel()
		<-m.donec
	})
}

// run is the expiry loop: it sleeps on one timer set to the earliest
// deadline, and ends whatever is due when it fires or when an earlier
// deadline is granted.
func (m *Manager) run(ctx context.Context) {
	defer close(m.donec)
	timer := m.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		m.expire(ctx)
		m.arm(timer)
		select {
		case <-m.stopc:
			return
		case <-m.rearmc:
		case <-timer.C():
		}
	}
}

// arm sets timer to fire at the earliest deadline, or stops it if there is
// no session.
func (m *Manager) arm(timer clock.Timer) {
	m.mu.Lock()
	next, ok := m.mu.table.NextDeadline()
	now := m.clock.Now()
	m.mu.Unlock()
	if !ok {
		timer.Stop()
		return
	}
	timer.Reset(max(next.Sub(now), 0))
}

// expire ends every session that is due.
func (m *Manager) expire(ctx context.Context) {
	m.mu.Lock()
	ended := m.mu.table.Expire(m.clock.Now())
	m.mu.Unlock()
	for _, s := range ended {
		if err := m.commitEnd(ctx, s, Expired); err != nil {
			// Not committed: nothing of the session is released here. Its
			// record stays in the Store, and the next Manager (after a
			// restart or a leader change) gives it a full TTL and expires
			// it again unless its holder renews it there.
			glog.Warningf("session %s (holder %q) expired, but its end could not be committed: %v", s.ID, s.Holder, err)
		}
	}
}

func (m *Manager) end(s Session, why EndReason) {
	glog.V(1).Infof("session %s (holder %q) %v", s.ID, s.Holder, why)
	if m.onEnd != nil {
		m.onEnd(s, why)
	}
}
