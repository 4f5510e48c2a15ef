package volume

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
)

const (
	// minCheckGap is the least time between the start of two checks of a
	// volume that nobody waits for: a burst of errors shares one. A check
	// a reader waits for runs at once.
	minCheckGap = time.Second
	// fullRecheck is how often a volume a check found full is checked
	// again, so it comes back soon after space is freed.
	fullRecheck = 5 * time.Second
	// wakeEvery bounds the sleep of a volume's checker, which looks for
	// stalled I/O at every wake.
	wakeEvery = 5 * time.Second
	// stallAfter: a volume with store calls under way, none of which has
	// ended for this long, is checked. A disk that hangs returns no error
	// to ask for a check; the check, bounded by the check timeout, then
	// finds it.
	stallAfter = 10 * time.Second
)

// watch runs the checks of v, one at a time, until Close or v fails:
// those asked for (an I/O error: at once if a caller waits for it, else
// no sooner than minCheckGap after the last check started), every
// fullRecheck while v is full, every CheckInterval, and when its I/O
// stalls. Each volume has its own checker, so a disk that hangs holds up
// the checks of no other.
func (s *Set) watch(v *Volume) {
	defer s.checkers.Done()
	opened := s.cfg.Clock.Now()
	var stall stallWatch
	for !v.Failed() {
		select {
		case <-s.stopc:
			return
		default:
		}
		wait := s.untilDue(v, opened)
		if wait <= 0 {
			s.runCheck(v)
			continue
		}
		t := s.cfg.Clock.NewTimer(min(wait, wakeEvery))
		select {
		case <-s.stopc:
			t.Stop()
			return
		case <-v.done:
		case <-v.kick:
		case <-t.C():
		}
		t.Stop()
		if stall.stalled(v, s.cfg.Clock.Now()) {
			glog.Warningf("volume %s: store calls under way, none ended for %v: checking the disk", v.dir, stallAfter)
			v.ask(false)
		}
	}
}

// untilDue returns how long until v's next check is due (<= 0: now).
func (s *Set) untilDue(v *Volume, opened time.Time) time.Duration {
	now := s.cfg.Clock.Now()
	v.check.Lock()
	last, asked, urgent := v.check.last, v.check.wanted > v.check.started, v.check.urgent
	v.check.Unlock()
	switch {
	case asked && (urgent || last.IsZero()):
		return 0
	case asked:
		return last.Add(minCheckGap).Sub(now)
	case last.IsZero():
		last = opened
	}
	next := last.Add(s.cfg.CheckInterval)
	if full := last.Add(fullRecheck); v.isFull() && full.Before(next) {
		next = full
	}
	return next.Sub(now)
}

// stallWatch sees a volume's I/O stall: store calls under way, and none
// ended, for stallAfter.
type stallWatch struct {
	ended int64
	// since is when calls were first seen under way with none ending
	// since; zero while none is under way.
	since time.Time
}

// stalled reports whether v's I/O has stalled; while it lasts, once per
// stallAfter.
func (w *stallWatch) stalled(v *Volume, now time.Time) bool {
	busy, ended := v.ops.busy.Load(), v.ops.ended.Load()
	switch {
	case busy == 0:
		w.ended, w.since = ended, time.Time{}
		return false
	case ended != w.ended || w.since.IsZero():
		w.ended, w.since = ended, now
		return false
	case now.Sub(w.since) < stallAfter:
		return false
	}
	w.since = now
	return true
}

// runCheck checks v's disk and acts on the result: a volume that fails,
// or whose check does not finish within CheckTimeout (a disk that hangs
// rather than failing), goes out of service; one that only has no space
// is Full until a check finds room. The check runs on a goroutine of its
// own, which a hung disk may keep long after runCheck has given up on it.
func (s *Set) runCheck(v *Volume) {
	n := v.startCheck(s.cfg.Clock.Now())
	result := make(chan error, 1)
	// Armed before the check starts: a test on a fake clock that sees
	// the check under way may move the clock past it.
	timeout := s.cfg.Clock.NewTimer(s.cfg.CheckTimeout)
	s.goIO(func() { result <- s.checkDisk(v) })
	var err error
	select {
	case err = <-result:
	case <-timeout.C():
		err = fmt.Errorf("blockstore: %s: a check of the disk did not finish within %v (--volume-check-timeout): the disk hangs", v.dir, s.cfg.CheckTimeout)
	}
	timeout.Stop()
	s.act(v, err)
	v.endCheck(n, err)
}

// checkDisk is the check itself: the store's, then, for a volume found
// full, whether it has room again.
func (s *Set) checkDisk(v *Volume) error {
	err := v.store.Check()
	if err == nil && v.isFull() {
		err = s.roomAgain(v)
	}
	return err
}

// act applies the result of a check of v.
func (s *Set) act(v *Volume, err error) {
	now := s.cfg.Clock.Now()
	switch {
	case err == nil:
		if v.setFull(false, "", now) {
			glog.Infof("volume %s has room again: back in service", v.dir)
			s.cfg.OnChange()
		}
	case errors.Is(err, blockstore.ErrFull):
		if v.setFull(true, err.Error(), now) {
			glog.Warningf("volume %s is full: no new replica goes there until space is freed: %v", v.dir, err)
			s.cfg.OnChange()
		}
	default:
		s.fail(v, err)
	}
}

// checkNow asks for a check of v that starts from now on, to run at once,
// and returns its result; ErrVolumeFailed (with the reason) if v fails
// meanwhile, blockstore.ErrClosed if the Set closes. It waits on v's
// checks alone, each bounded by CheckTimeout.
func (s *Set) checkNow(v *Volume) error {
	n := v.ask(true)
	for {
		v.check.Lock()
		ended, err, endc := v.check.ended, v.check.err, v.check.endc
		v.check.Unlock()
		if ended >= n {
			return err
		}
		select {
		case <-endc:
		case <-v.done:
			return v.failure()
		case <-s.stopc:
			return blockstore.ErrClosed
		}
	}
}

// roomAgain says whether a volume found full has room again: a check
// passed, and its free space is a margin above what the policy keeps
// free (a disk that has freed one block is still full). It returns an
// error wrapping blockstore.ErrFull if not.
func (s *Set) roomAgain(v *Volume) error {
	capacity, free := s.space(v)
	if capacity == 0 {
		return nil // it cannot tell: the check is all there is
	}
	need := s.policy.Load().reserve(capacity) + fullMargin(capacity)
	if free < need {
		return fmt.Errorf("%w: %s: %d bytes free, %d wanted to take new replicas again", blockstore.ErrFull, v.dir, free, need)
	}
	return nil
}

// fullMargin is how much more than the policy's reserve a full volume
// must have free to come back: a hundredth of its capacity, at most 64
// MiB.
func fullMargin(capacity int64) int64 { return min(capacity/100, 64<<20) }

// fail takes v out of service: its store is abandoned (on an I/O
// goroutine: a failing disk may hang), its replicas are no longer
// served or reported, and OnChange tells the nameserver. Past the
// tolerated number of failed volumes, Fatal delivers why.
func (s *Set) fail(v *Volume, cause error) {
	blocks, _ := v.store.Usage()
	if !v.fail(cause.Error(), s.cfg.Clock.Now()) {
		return
	}
	glog.Errorf("volume %s failed its check and is out of service; its %d replicas are to be copied elsewhere: %v", v.dir, blocks, cause)
	s.goIO(v.store.Abandon)
	s.cfg.OnChange()
	if err := s.tolerable(); err != nil {
		s.fatalOnce.Do(func() { s.fatal <- fmt.Errorf("%w: stopping", err) })
	}
}

// Fail takes v out of service for cause, found by its owner (a volume
// that names another cluster), and returns an error if more volumes have
// now failed than tolerated.
func (s *Set) Fail(v *Volume, cause error) error {
	s.fail(v, cause)
	return s.tolerable()
}

// Suspect asks for a check of v: its owner met an error on it.
func (s *Set) Suspect(v *Volume) {
	s.note(v, errSuspect)
}

// errSuspect is no answer about a request: it asks for a check.
var errSuspect = errors.New("suspect")
