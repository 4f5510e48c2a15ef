package nameserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/taskgroup"
	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/fileclose"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/repair"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// term is one leadership term of this nameserver: everything only a
// leader may do, started together once the node leads and has applied
// every command of the terms before (a Barrier), stopped together when
// it stops leading, and before it hands leadership over. Its services
// see the server through the embedded *Server (the namespace, the
// replica, the watchers, the chunkservers' connections); what is the
// term's own is below.
type term struct {
	*Server
	// num is Raft's term: the chunkservers' commands carry it, and a
	// chunkserver refuses one older than the newest it has seen.
	num uint64

	// sessions expire from this term's clock: every stored session got a
	// full TTL when the term began.
	sessions *session.Manager
	// blocks is rebuilt from the chunkservers' registrations and reports.
	blocks  *blockmap.Map
	closer  *fileclose.Closer
	cleaner *dirlock.Cleaner
	creates createTracker
	safe    *safeMode
	// repair keeps the blocks' replica counts up (nameserver/repair).
	repair *repair.Scheduler
	// dead remembers the chunkservers declared dead, for the report (and
	// in the namespace, so a new term lists them too).
	dead *deadList
	// started is when the term began: a chunkserver the namespace
	// remembers that has not registered by then plus the dead timeout is
	// listed as dead.
	started time.Time
	// tasks are the term's own background work (releasing the locks of
	// ended sessions, deletes of replicas).
	tasks *taskgroup.Group
	// keys sign block tokens (tokens.go); regs are the certificates that
	// registered the chunkservers, unalloc the replicas of blocks never
	// allocated, verifySlots the verifications of reported replicas in
	// flight (trust.go).
	keys        blockKeys
	regs        registrations
	unalloc     unallocated
	verifySlots chan struct{}

	stopc        chan struct{}
	livenessDone chan struct{}
	// stops are what start started, stopped in reverse order.
	stops []func()
	once  sync.Once
}

// barrierTimeout bounds one Barrier at the start of a term; a term start
// retries until it succeeds or the leadership ends.
const barrierTimeout = 10 * time.Second

// startTerm brings up a leadership term: it waits until every command
// of the terms before is applied here, formats a new namespace and
// records this node in the member table, then starts the term's
// services. ctx ends if leadership ends meanwhile.
func (s *Server) startTerm(ctx context.Context, num uint64) (*term, error) {
	for {
		err := s.node.Barrier(barrierTimeout)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		glog.Warningf("term %d: waiting for the commands of earlier terms to apply: %v", num, err)
	}
	if err := s.format(); err != nil {
		return nil, err
	}
	t := &term{Server: s, num: num, tasks: taskgroup.New(), started: s.cfg.Clock.Now(),
		stopc: make(chan struct{}), livenessDone: make(chan struct{}), verifySlots: make(chan struct{}, maxVerifications)}
	t.dead = newDeadList(t.recordChunkserver)
	t.blocks = blockmap.New(t.started)
	if err := t.start(); err != nil {
		t.stop()
		return nil, err
	}
	return t, nil
}

// format formats an empty namespace: the first leader of a new group
// picks the cluster id, and every replica applies the same one.
func (s *Server) format() error {
	if s.ns.Formatted() {
		return nil
	}
	id, err := namespace.NewClusterID()
	if err != nil {
		return err
	}
	if _, err := s.propose(&bfspb.Command{Op: &bfspb.Command_Format{Format: &bfspb.FormatCmd{ClusterId: id}}}); err != nil {
		return fmt.Errorf("format the namespace: %w", err)
	}
	glog.Infof("formatted the namespace: cluster id %s", s.ns.ClusterID())
	return nil
}

// start starts the term's services in order; each one started is
// stopped by stop.
func (t *term) start() error {
	// Tokens are signed from the first request on: the keys come first.
	if err := t.rotateKeys(); err != nil {
		return err
	}
	if err := t.startSafeMode(); err != nil {
		return err
	}
	if err := t.loadDraining(); err != nil {
		return err
	}
	if err := t.loadChunkservers(); err != nil {
		return err
	}
	if err := t.startRepair(); err != nil {
		return err
	}
	t.stops = append(t.stops, t.repair.Close)
	if err := t.startCleaning(); err != nil {
		return err
	}
	t.stops = append(t.stops, t.stopCleaning)
	if err := t.startSessions(); err != nil {
		return err
	}
	t.stops = append(t.stops, t.sessions.Close)
	if err := t.recover(); err != nil {
		return err
	}
	go t.watchChunkservers()
	t.stops = append(t.stops, func() { close(t.stopc); <-t.livenessDone })
	glog.Infof("leading the group in term %d: %d sessions, each with a full TTL; safe mode %v",
		t.num, len(t.sessions.List()), t.safe.On())
	return nil
}

// stop stops the term's services, the last started first. Idempotent.
func (t *term) stop() {
	t.once.Do(func() {
		for i := len(t.stops) - 1; i >= 0; i-- {
			t.stops[i]()
		}
		t.tasks.Stop()
	})
}

// startCleaning sets up the closer of files open for write and the
// directory-lock cleaner that drives it; nothing runs until recover.
func (t *term) startCleaning() error {
	var err error
	t.closer, err = fileclose.New(fileclose.Config{
		Files:           fileStore{t: t, closed: func(b int64) { t.repair.Check(b) }},
		Replicas:        t.blocks,
		Chunkservers:    chunkservers{t},
		Clock:           t.cfg.Clock,
		DeadTimeout:     t.cfg.DeadTimeout,
		SealConcurrency: t.cfg.SealConcurrency,
		OnClaimMismatch: t.metrics.claimMismatch.Inc,
		BeforeClose:     t.cfg.TestingKnobs.BeforeClose,
	})
	if err != nil {
		return err
	}
	t.cleaner, err = dirlock.NewCleaner(dirlock.CleanerConfig{
		Closer: t.closer,
		Store:  cleaningStore{t},
		Clock:  t.cfg.Clock,
		OnEnd:  t.cleaned,
	})
	if err != nil {
		t.closer.Close()
	}
	return err
}

// stopCleaning stops the cleanings, then the closes they wait for, then
// the term's own background work, which may have started either.
func (t *term) stopCleaning() {
	t.cleaner.Close()
	t.closer.Close()
	t.tasks.Stop()
}

// startSessions starts the session manager over every stored session,
// each with a full TTL from now.
func (t *term) startSessions() error {
	records, err := t.ns.Sessions()
	if err != nil {
		return err
	}
	recovered := make([]session.Session, 0, len(records))
	for _, r := range records {
		recovered = append(recovered, sessionFromRecord(r))
	}
	t.sessions, err = session.NewManager(session.Config{
		Clock:  t.cfg.Clock,
		Store:  sessionStore{t},
		MinTTL: t.cfg.MinSessionTTL,
		MaxTTL: t.cfg.MaxSessionTTL,
		OnEnd:  t.onSessionEnd,
		// Counted by owner identity from the sessions stored, as every
		// term starts: the limits hold across leader changes.
		MaxPerOwner: t.cfg.Limits.MaxSessionsPerIdentity,
		MaxTotal:    t.cfg.Limits.MaxSessions,
	}, recovered)
	return err
}

// recover resumes what the terms before left half done: files of ended
// sessions are closed, cleanings continue, locks of ended sessions are
// released.
func (t *term) recover() error {
	if err := t.closer.Load(func(id string) bool { return t.sessions.Valid(session.ID(id)) }); err != nil {
		return err
	}
	return t.resumeLocks()
}

// terms starts and stops the leadership terms as the replica reports
// leadership, one at a time, in order.
type terms struct {
	s  *Server
	mu struct {
		sync.Mutex
		// cancel ends the start under way; done is closed when it has
		// returned (and published its term, if it started one).
		cancel context.CancelFunc
		done   chan struct{}
		closed bool
	}
}

func newTerms(s *Server) *terms { return &terms{s: s} }

// leadership is the replica's OnLeadership: a new term starts in the
// background (its Barrier may take a while); the end of leadership stops
// the term in office, or the start under way, before it returns.
func (ts *terms) leadership(leader bool, num uint64) {
	ts.s.metrics.replica.leaderChanges.Inc()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.endLocked()
	if !leader || ts.mu.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ts.mu.cancel, ts.mu.done = cancel, done
	go func() {
		defer close(done)
		t, err := ts.s.startTerm(ctx, num)
		if err != nil {
			if ctx.Err() == nil {
				glog.Errorf("term %d: could not start leading: %v; handing leadership over", num, err)
				go ts.s.node.Transfer()
			}
			return
		}
		if ctx.Err() != nil { // leadership ended while it started
			t.stop()
			return
		}
		ts.s.lead.Store(t)
		ts.s.publishSoon()
	}()
}

// end stops the term in office (before a leadership transfer).
func (ts *terms) end() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.endLocked()
}

func (ts *terms) endLocked() {
	if ts.mu.cancel == nil {
		return
	}
	ts.mu.cancel()
	<-ts.mu.done
	ts.mu.cancel, ts.mu.done = nil, nil
	if t := ts.s.lead.Swap(nil); t != nil {
		glog.Infof("term %d ends: stopping what only the leader does", t.num)
		t.stop()
	}
}

// close ends the term in office and starts none after.
func (ts *terms) close() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.mu.closed = true
	ts.endLocked()
}

// current returns the term in office, nil if this node does not lead.
func (s *Server) current() *term { return s.lead.Load() }

// termKey is the context key of the term a request is served in.
type termKey struct{}

// termOf returns the term a request is served in: the one the
// leaderOnly interceptor found in office when the request arrived.
func (s *Server) termOf(ctx context.Context) *term {
	if t, ok := ctx.Value(termKey{}).(*term); ok {
		return t
	}
	return s.current()
}

// errNotLeading refuses what a follower (or a leader whose term has not
// started yet) cannot do.
var errNotLeading = errors.New("not the leader")

// propose stamps cmd with the time and proposes it to the group; it
// returns once this node has applied it.
func (s *Server) propose(cmd *bfspb.Command) (*namespace.Result, error) {
	cmd.TimeNs = s.cfg.Clock.Now().UnixNano()
	return s.node.Propose(cmd)
}

// verify returns nil if this node still leads, after a round with a
// majority that started after the call: what a decisive read answers
// after it is no staler than the request.
func (t *term) verify() error { return t.node.VerifyLeader() }

// Leading reports whether this nameserver leads its group with a term
// in office (its leader-only services running).
func (s *Server) Leading() bool { return s.current() != nil }
