package blockmap

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Sentinel errors of ReportPage.
var (
	// ErrUnknownServer: the registration is unknown or dead; the
	// chunkserver must register again.
	ErrUnknownServer = errors.New("unknown chunkserver registration")
	// ErrReportOrder: the page is not the next one of the report under
	// way (a page was lost, or a newer report or registration replaced
	// it); the chunkserver starts its report again from page 0.
	ErrReportOrder = errors.New("block report page out of order")
)

// batch is how many blocks a report applies, or a walk visits, per hold
// of the mutex: some 0.2 ms of work. With 4096 the longest holds on a
// loaded 2-core machine reached 10 to 30 ms (once 143 ms), the holder
// descheduled or assisting the GC mid-batch; with 1024 they stay near a
// millisecond, for the same total time.
const batch = 1024

// Page places one message of a full block report. A report is pages
// 0, 1, ... sent in order, all with the same Report id, every one but
// the last with More set. The zero Page is a whole report in one page.
type Page struct {
	Report uint64
	Seq    uint32
	More   bool
}

// reportState is the report under way of a slot.
type reportState struct {
	active bool
	id     uint64
	// next is the Seq the next page must carry; gen the generation the
	// report stamps.
	next uint32
	gen  uint32
}

// ReportPage applies one page of a full block report of the chunkserver
// at addr, registered as id: its replicas are recorded, and the last page
// (More unset) forgets every replica of the chunkserver that no page of
// the report named and that was not received (Received) since the
// report began. Until the last page, replicas not yet named stay. first
// says the page belongs to the registration's first full report (one
// whose last page has not been applied yet; Server.Reported is set by
// that last page).
//
// Page 0 starts a report, abandoning any other under way (its pages
// then fail with ErrReportOrder). The mutex is held for one batch of
// replicas at a time, never for the whole page.
func (m *Map) ReportPage(id ServerID, addr string, p Page, replicas map[BlockID]Replica, now time.Time) (first bool, err error) {
	gen, first, err := m.startPage(id, addr, p, now)
	if err != nil {
		return false, err
	}
	m.lock()
	sl, err := m.reportingLocked(id, addr, gen)
	n := 0
	for b, r := range replicas {
		if err != nil {
			break
		}
		if n++; n%batch == 0 {
			// Another report or registration may replace this one
			// while the mutex is free.
			m.yieldLocked()
			if sl, err = m.reportingLocked(id, addr, gen); err != nil {
				break
			}
		}
		m.setLocked(b, sl, r)
	}
	if err != nil {
		m.unlock()
		return false, err
	}
	m.endPageLocked(sl, p, now)
	m.unlock()
	if !p.More {
		m.sweep()
	}
	return first, nil
}

// startPage checks that p is the page expected, starting a report at
// page 0, and returns the report's generation and whether the
// registration has yet to complete a report.
func (m *Map) startPage(id ServerID, addr string, p Page, now time.Time) (gen uint32, first bool, err error) {
	m.lock()
	defer m.unlock()
	s, ok := m.serverLocked(id, addr)
	if !ok {
		return 0, false, ErrUnknownServer
	}
	s.LastBeat = now
	sl := &m.mu.slots[m.mu.index[addr]]
	if p.Seq == 0 {
		sl.nOld += sl.nCur
		sl.nCur = 0
		sl.cur++
		sl.report = reportState{active: true, id: p.Report, next: 0, gen: sl.cur}
	}
	if r := sl.report; !r.active || r.id != p.Report || r.next != p.Seq {
		return 0, false, fmt.Errorf("%w: page %d of report %d from %s", ErrReportOrder, p.Seq, p.Report, addr)
	}
	return sl.report.gen, !s.Reported, nil
}

// reportingLocked returns the slot of the registration if its report of
// generation gen is still the one under way.
func (m *Map) reportingLocked(id ServerID, addr string, gen uint32) (uint32, error) {
	if _, ok := m.serverLocked(id, addr); !ok {
		return 0, fmt.Errorf("%w: %d at %s, replaced during a report", ErrUnknownServer, id, addr)
	}
	i := m.mu.index[addr]
	if r := m.mu.slots[i].report; !r.active || r.gen != gen {
		return 0, fmt.Errorf("%w: a newer report of %s started", ErrReportOrder, addr)
	}
	return i, nil
}

// endPageLocked moves the report of slot i past page p; after the last
// page, the replicas it did not name are gone (the floor rises to its
// generation) and the sweep will free them.
func (m *Map) endPageLocked(i uint32, p Page, now time.Time) {
	sl := &m.mu.slots[i]
	sl.report.next = p.Seq + 1
	if p.More {
		return
	}
	if sl.nOld > 0 {
		m.mu.dirty = true
	}
	sl.floor = sl.report.gen
	sl.nOld = 0
	sl.report = reportState{}
	s := sl.srv
	s.Reported = true
	s.LastBeat, s.LastReport, s.Blocks = now, now, sl.nCur
}

// yieldLocked lets other goroutines take the mutex between two batches.
func (m *Map) yieldLocked() {
	m.unlock()
	runtime.Gosched()
	m.lock()
}

// eachBlockLocked calls fn with every block and its replicas (live or
// not), releasing the mutex between batches. fn runs with the mutex held
// and may change or delete the block it is given. Blocks added or
// deleted by others during the walk may or may not be visited (a Go map
// may be changed while it is ranged over).
func (m *Map) eachBlockLocked(fn func(BlockID, []replica)) {
	n := 0
	for b, reps := range m.mu.blocks {
		if n%batch == 0 && n > 0 {
			m.yieldLocked()
		}
		n++
		fn(b, reps)
	}
}

// sweep frees the replicas that are gone (see slot) from the blocks, a
// batch at a time. One sweep runs at a time; one asked for while another
// runs is done by that one, in another pass.
func (m *Map) sweep() {
	m.lock()
	defer m.unlock()
	if m.mu.sweeping {
		return
	}
	m.mu.sweeping = true
	for m.mu.dirty {
		m.mu.dirty = false
		m.eachBlockLocked(m.sweepBlockLocked)
	}
	m.mu.sweeping = false
}

func (m *Map) sweepBlockLocked(b BlockID, reps []replica) {
	keep := reps[:0]
	for _, r := range reps {
		if m.liveLocked(r) {
			keep = append(keep, r)
		} else {
			m.uncountLocked(r) // one of a failed volume is still counted
		}
	}
	switch {
	case len(keep) == 0:
		delete(m.mu.blocks, b)
	case len(keep) < len(reps):
		m.mu.blocks[b] = keep
	}
}
