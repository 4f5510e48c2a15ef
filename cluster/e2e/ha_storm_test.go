package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bfs-go/bfs/sdk"
)

// storm is clients creating files and locking and unlocking directories
// of a group until stopped, recording every operation acknowledged.
type storm struct {
	t       *testing.T
	clients []*sdk.Client
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      struct {
		sync.Mutex
		creates []string
		grants  []grant
		acks    int
		errs    int
		// changed is closed (and replaced) at every acknowledgment.
		changed chan struct{}
		// firstAfter is when the first acknowledgment after mark came.
		mark, firstAfter time.Time
	}
}

// grant is a lock grant acknowledged to a client.
type grant struct {
	client int
	dir    string
	epoch  uint64
}

const stormDirs = 2

// newStorm makes the clients and their directories: /storm/cK for files,
// /locks/cK/dJ to lock.
func newStorm(t *testing.T, g *group, clients int) *storm {
	s := &storm{t: t}
	for k := range clients {
		c := g.client(sdk.WithHolder(fmt.Sprintf("storm-%d", k)), sdk.WithSessionTTL(30*time.Second))
		s.clients = append(s.clients, c)
		ctx := ctxT(t, time.Minute)
		if err := c.MkdirAll(ctx, fmt.Sprintf("/storm/c%d", k), 0); err != nil {
			t.Fatal(err)
		}
		for j := range stormDirs {
			if err := c.MkdirAll(ctx, fmt.Sprintf("/locks/c%d/d%d", k, j), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// start runs the storm; round names this run's files.
func (s *storm) start(round int) {
	s.stopc = make(chan struct{})
	s.mu.Lock()
	s.mu.changed = make(chan struct{})
	s.mu.Unlock()
	for k, c := range s.clients {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.run(k, c, round)
		}()
	}
}

func (s *storm) run(k int, c *sdk.Client, round int) {
	for i := 0; ; i++ {
		select {
		case <-s.stopc:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		started := time.Now()
		if i%4 == 3 {
			s.lockUnlock(ctx, k, c, fmt.Sprintf("/locks/c%d/d%d", k, (i/4)%stormDirs), started)
		} else {
			p := fmt.Sprintf("/storm/c%d/r%02d-%06d", k, round, i)
			if err := c.Touch(ctx, p); err != nil {
				s.failed(err)
			} else {
				s.ack(started, func() { s.mu.creates = append(s.mu.creates, p) })
			}
		}
		cancel()
	}
}

// lockUnlock locks dir and releases it: every grant is a new lock.
func (s *storm) lockUnlock(ctx context.Context, k int, c *sdk.Client, dir string, started time.Time) {
	l, err := c.LockDir(ctx, dir)
	if err != nil {
		s.failed(err)
		return
	}
	s.ack(started, func() { s.mu.grants = append(s.mu.grants, grant{client: k, dir: dir, epoch: l.Epoch()}) })
	if err := l.Unlock(ctx); err != nil {
		s.failed(err)
	}
}

// ack records an operation started at started and acknowledged.
func (s *storm) ack(started time.Time, record func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	record()
	s.mu.acks++
	if !s.mu.mark.IsZero() && s.mu.firstAfter.IsZero() && started.After(s.mu.mark) {
		s.mu.firstAfter = time.Now()
	}
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// failed counts an operation that was not acknowledged: during a
// failover a call whose outcome is unknown fails with ErrUnavailable.
func (s *storm) failed(err error) {
	if !errors.Is(err, sdk.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		s.t.Logf("storm: %v", err)
	}
	s.mu.Lock()
	s.mu.errs++
	s.mu.Unlock()
}

// waitAcks waits until n more operations were acknowledged.
func (s *storm) waitAcks(n int) {
	s.t.Helper()
	s.mu.Lock()
	target := s.mu.acks + n
	s.mu.Unlock()
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		acks, changed := s.mu.acks, s.mu.changed
		s.mu.Unlock()
		if acks >= target {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			s.t.Fatalf("the storm got %d of %d acknowledgments in 2 minutes", acks-target+n, n)
		}
	}
}

// markNow starts timing: firstAck then tells when the first operation
// started after now was acknowledged.
func (s *storm) markNow() {
	s.mu.Lock()
	s.mu.mark, s.mu.firstAfter = time.Now(), time.Time{}
	s.mu.Unlock()
}

func (s *storm) firstAck() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.firstAfter.Sub(s.mu.mark)
}

func (s *storm) stop() {
	close(s.stopc)
	s.wg.Wait()
}

// checkCreates checks that every acknowledged create exists (listing each
// client's directory through c) and returns how many were checked and
// how many were lost.
func (s *storm) checkCreates(c *sdk.Client) (checked, lost int) {
	s.t.Helper()
	s.mu.Lock()
	creates := slices.Clone(s.mu.creates)
	s.mu.Unlock()
	names := map[string]bool{}
	for k := range s.clients {
		dir := fmt.Sprintf("/storm/c%d", k)
		for _, n := range listNames(s.t, c, dir) {
			names[dir+"/"+n] = true
		}
	}
	for _, p := range creates {
		if !names[p] {
			lost++
			s.t.Errorf("acknowledged create of %s lost", p)
		}
	}
	return len(creates), lost
}

// TestGroupStormSurvivesLeaderKills is a create-and-lock storm from six
// clients while the leader of the group is killed with SIGKILL, trial
// after trial (20; $BFS_HA_TRIALS caps it), and then all three members
// at once and restarted. After each trial every create acknowledged so
// far must exist, and the lock grants acknowledged must have epochs that
// are unique and grow from trial to trial (I2, I6).
func TestGroupStormSurvivesLeaderKills(t *testing.T) {
	g := startGroup(t, 3)
	n := trials(t, 20)
	s := newStorm(t, g, 6)
	reader := g.client(sdk.WithHolder("reader"))
	var epochs [][]grant // the grants of each trial
	totalLost := 0
	for trial := 0; trial <= n; trial++ {
		s.mu.Lock()
		before := len(s.mu.grants)
		s.mu.Unlock()
		s.start(trial)
		s.waitAcks(120)
		if trial < n {
			old := g.waitLeader(-1)
			g.kill(old)
			s.markNow()
			l := g.waitLeader(old)
			s.waitAcks(120) // the storm goes on through the new leader
			s.stop()
			t.Logf("trial %d: killed leader %s; %s leads; the first operation started after the kill acknowledged %v after it",
				trial, g.names[old], g.names[l], s.firstAck().Round(time.Millisecond))
			g.restart(old)
			g.waitFollowing(old)
		} else {
			for i := range groupSize {
				g.kill(i)
			}
			s.stop()
			for i := range groupSize {
				g.restart(i)
			}
			l := g.waitLeader(-1)
			t.Logf("trial %d: killed all three members and restarted them; %s leads", trial, g.names[l])
		}
		checked, lost := s.checkCreates(reader)
		totalLost += lost
		s.mu.Lock()
		epochs = append(epochs, slices.Clone(s.mu.grants[before:]))
		acks, errs := s.mu.acks, s.mu.errs
		s.mu.Unlock()
		t.Logf("trial %d: %d acknowledged creates checked, %d lost; %d operations acknowledged so far, %d failed (outcome unknown)",
			trial, checked, lost, acks, errs)
		if t.Failed() {
			t.FailNow()
		}
	}
	grants, dups := checkEpochs(t, epochs)
	s.mu.Lock()
	creates := len(s.mu.creates)
	s.mu.Unlock()
	t.Logf("%d trials (%d leader kills, 1 kill of all three): %d acknowledged creates, %d lost; %d acknowledged lock grants, %d epochs reused or out of order",
		n+1, n, creates, totalLost, grants, dups)
}

// checkEpochs checks the grants of each trial: no epoch acknowledged
// twice (to another client or directory), a client's grants of a
// directory growing, and every epoch of a trial above every epoch of the
// trials before. It returns the number of grants and of violations.
func checkEpochs(t *testing.T, trials [][]grant) (grants, bad int) {
	t.Helper()
	owner := map[uint64]grant{}
	last := map[string]uint64{}
	var floor uint64
	for i, tr := range trials {
		var top uint64
		for _, gr := range tr {
			grants++
			key := fmt.Sprintf("%d %s", gr.client, gr.dir)
			if o, ok := owner[gr.epoch]; ok && o != gr {
				bad++
				t.Errorf("epoch %d granted to client %d on %s and to client %d on %s", gr.epoch, o.client, o.dir, gr.client, gr.dir)
			}
			owner[gr.epoch] = gr
			if gr.epoch < last[key] {
				bad++
				t.Errorf("client %d got %s at epoch %d after %d", gr.client, gr.dir, gr.epoch, last[key])
			}
			last[key] = gr.epoch
			if gr.epoch <= floor {
				bad++
				t.Errorf("trial %d: epoch %d is not above the epochs of the trials before (up to %d)", i, gr.epoch, floor)
			}
			top = max(top, gr.epoch)
		}
		floor = max(floor, top)
	}
	return grants, bad
}
