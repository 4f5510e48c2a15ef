package fileclose

import (
	"time"

	"github.com/golang/glog"
)

// startSealsLocked sends Seal to every replica of f not yet reported.
func (c *Closer) startSealsLocked(f *closing) {
	if f.sealing || f.block == 0 {
		f.sealing = true
		return
	}
	f.sealing = true
	for _, addr := range f.writeSet {
		if _, ok := f.reports[addr]; !ok {
			c.goRun(func() { c.sealReplica(f, addr) })
		}
	}
}

// sealReplica seals f's block at addr, retrying with backoff until the
// chunkserver accepts or the file no longer waits for it. While the
// chunkserver is declared dead it waits for it to register again: the
// file may close without it (another replica reported), or it may be the
// only way the file ever closes (every replica was away).
//
// A live chunkserver that keeps failing the Seal (a replica or a disk in
// error, or a network that lets its heartbeats through but not our calls)
// is given up on after a dead timeout, as if it were dead: cleaning ends
// whenever one replica can be sealed (I7).
func (c *Closer) sealReplica(f *closing, addr string) {
	var failingSince time.Time
	b := rpcBackoff()
	for {
		c.mu.Lock()
		_, reported := f.reports[addr]
		over := reported || f.finishing
		registered := c.mu.registered
		c.mu.Unlock()
		if over {
			return
		}
		if c.dead(addr) {
			failingSince = time.Time{}
			if !c.sleepUntil(b.NextBackOff(), registered) {
				return
			}
			continue
		}
		if c.sealOnce(addr, f.block) {
			return // its BlockReceived follows
		}
		now := c.clock.Now()
		if failingSince.IsZero() {
			failingSince = now
		} else if now.Sub(failingSince) >= c.deadTimeout {
			c.giveUp(f, addr)
			return
		}
		if !c.sleep(b.NextBackOff()) {
			return
		}
	}
}

// giveUp stops waiting for the replica of f at addr, whose seal kept
// failing.
func (c *Closer) giveUp(f *closing, addr string) {
	glog.Warningf("block %d on %s: seal failing for over %v on a live chunkserver; closing the file without it", f.block, addr, c.deadTimeout)
	c.mu.Lock()
	if !f.finishing { // else finalize owns f's maps and reads them unlocked
		f.failed[addr] = true
	}
	ready := c.readyLocked(f)
	c.mu.Unlock()
	if ready {
		c.goRun(func() { c.finalize(f) })
	}
}

// sealOnce asks the chunkserver at addr to seal block, once.
func (c *Closer) sealOnce(addr string, block int64) bool {
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx().Done():
		return false
	}
	defer func() { <-c.sem }()
	if err := c.chunkservers.Seal(c.ctx(), addr, block); err != nil {
		glog.V(1).Infof("seal block %d on %s: %v", block, addr, err)
		return false
	}
	return true
}

// sealLate seals a replica that missed the close of its file, retrying
// with backoff until the chunkserver accepts (its BlockReceived then
// reconciles the length), it is declared dead (its next registration's
// block report brings the replica up again), or the Closer closes. A
// chunkserver that just came back may not be reachable at once.
func (c *Closer) sealLate(addr string, block int64) {
	b := rpcBackoff()
	for {
		if c.sealOnce(addr, block) || c.dead(addr) || !c.sleep(b.NextBackOff()) {
			return
		}
	}
}

// truncate cuts a longer replica down to the agreed length, retrying with
// backoff until it is done, the chunkserver is declared dead, or the
// Closer closes. A replica left long (its chunkserver died) is still
// consistent up to the agreed length, which is all a reader is given.
//
// A live chunkserver that keeps failing is given up on after a dead
// timeout too: its replica stays longer than the file (still correct up
// to the file's length, which is all a reader is given) until its next
// block report tries again.
func (c *Closer) truncate(addr string, block, size int64) {
	start := c.clock.Now()
	b := rpcBackoff()
	for {
		err := c.chunkservers.Truncate(c.ctx(), addr, block, size)
		if err == nil {
			return
		}
		if c.dead(addr) {
			glog.Warningf("truncate block %d on %s to %d: %v; chunkserver is dead, leaving the replica long", block, addr, size, err)
			return
		}
		if c.clock.Now().Sub(start) >= c.deadTimeout {
			glog.Warningf("truncate block %d on %s to %d: %v; failing for over %v, leaving the replica long until its next report", block, addr, size, err, c.deadTimeout)
			return
		}
		if !c.sleep(b.NextBackOff()) {
			return
		}
	}
}
