package volume

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
)

const (
	// minCheckGap is the least time between two checks of a volume: a
	// burst of errors shares one.
	minCheckGap = time.Second
	// fullRecheck is how often a volume a check found full is checked
	// again, so it comes back soon after space is freed.
	fullRecheck = 5 * time.Second
)

// run checks the volumes that asked for it (an I/O error), those found
// full every fullRecheck and all of them every CheckInterval, until
// Close.
func (s *Set) run() {
	defer close(s.donec)
	last := make([]time.Time, len(s.vols))
	now := s.cfg.Clock.Now()
	for i := range last {
		last[i] = now
	}
	for {
		t := s.cfg.Clock.NewTimer(min(fullRecheck, s.cfg.CheckInterval))
		select {
		case <-s.stopc:
			t.Stop()
			return
		case <-s.kick:
		case <-t.C():
		}
		t.Stop()
		now := s.cfg.Clock.Now()
		for i, v := range s.vols {
			if v.Failed() {
				continue
			}
			due := now.Sub(last[i]) >= s.cfg.CheckInterval || v.isFull() && now.Sub(last[i]) >= fullRecheck
			if v.dirty.Swap(false) || due {
				last[i] = now
				s.checkNow(v)
			}
		}
	}
}

// checkNow checks v, unless a check ended less than minCheckGap ago (its
// result stands), and acts on the result: a volume that fails goes out of
// service; one that only has no space is Full until a check finds room.
// It returns the check's error.
func (s *Set) checkNow(v *Volume) error {
	v.check.Lock()
	defer v.check.Unlock()
	now := s.cfg.Clock.Now()
	if !v.check.at.IsZero() && now.Sub(v.check.at) < minCheckGap {
		return v.check.err
	}
	if v.Failed() {
		return ErrVolumeFailed
	}
	err := v.store.Check()
	if err == nil && v.isFull() {
		err = s.roomAgain(v)
	}
	v.check.at, v.check.err = s.cfg.Clock.Now(), err
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
	return err
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

// fail takes v out of service: its store is abandoned (in the
// background: a failing disk may hang), its replicas are no longer
// served or reported, and OnChange tells the nameserver. Past the
// tolerated number of failed volumes, Fatal delivers why.
func (s *Set) fail(v *Volume, cause error) {
	blocks, _ := v.store.Usage()
	if !v.fail(cause.Error(), s.cfg.Clock.Now()) {
		return
	}
	glog.Errorf("volume %s failed its check and is out of service; its %d replicas are to be copied elsewhere: %v", v.dir, blocks, cause)
	s.abandons.Go(v.store.Abandon)
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
