package statuspage

import (
	"sync"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Transition is one lock transition of the recent history: who held
// what, and why it changed (a forced unlock says "force").
type Transition struct {
	// Seq numbers the transitions this page has seen, from 1; the
	// history pages by it.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Gap marks where the page fell behind the transitions: some before
	// this one are missing. Its other fields are empty.
	Gap    bool   `json:"gap,omitempty"`
	Path   string `json:"path,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
	Holder string `json:"holder,omitempty"`
	// Session is a prefix of the holder's session id (the id itself
	// lets whoever knows it act as the holder).
	Session string `json:"session,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
}

// history keeps the last transitions in a ring. It is safe for
// concurrent use: the page's goroutine adds, requests read.
type history struct {
	mu struct {
		sync.Mutex
		ring []Transition
		// last is the Seq of the newest transition (0: none yet); it
		// sits at ring[(last-1) % len(ring)].
		last uint64
	}
}

func newHistory(n int) *history {
	h := &history{}
	h.mu.ring = make([]Transition, n)
	return h
}

// add records a transition seen at now (the event's own time if it has
// one: when the command was stamped).
func (h *history) add(ev *bfspb.DirLockEvent, now time.Time) {
	l := ev.GetLock()
	t := Transition{
		Time: now, Path: l.GetPath(), From: stateName(ev.GetPrevious()), To: stateName(l.GetStatus()),
		Reason: ev.GetReason(), Holder: l.GetHolder(), Session: sessionPrefix(l.GetSessionId()), Epoch: l.GetEpoch(),
	}
	if ns := l.GetSinceNs(); ns != 0 {
		t.Time = time.Unix(0, ns)
	}
	h.put(t)
}

// gap records that transitions may have been missed before now.
func (h *history) gap(now time.Time) { h.put(Transition{Time: now, Gap: true}) }

func (h *history) put(t Transition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.last++
	t.Seq = h.mu.last
	h.mu.ring[(t.Seq-1)%uint64(len(h.mu.ring))] = t
}

// before returns up to limit transitions older than seq (0: from the
// newest), newest first, and the seq to page on from (0 once the oldest
// kept was returned).
func (h *history) before(seq uint64, limit int) ([]Transition, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := uint64(len(h.mu.ring))
	oldest := uint64(1)
	if h.mu.last > n {
		oldest = h.mu.last - n + 1
	}
	from := h.mu.last
	if seq != 0 && seq-1 < from {
		from = seq - 1
	}
	var out []Transition
	for s := from; s >= oldest && s > 0 && len(out) < limit; s-- {
		out = append(out, h.mu.ring[(s-1)%n])
	}
	if len(out) == 0 || out[len(out)-1].Seq <= oldest {
		return out, 0
	}
	return out, out[len(out)-1].Seq
}
