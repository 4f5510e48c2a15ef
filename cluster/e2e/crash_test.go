package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestCreateStormSurvivesKill9 runs a create storm from several clients,
// kills the nameserver with SIGKILL in the middle of it, restarts it on the
// same data and checks that every create it acknowledged is there.
func TestCreateStormSurvivesKill9(t *testing.T) {
	const clients = 8
	dataDir := t.TempDir()
	ns := startLoneNameServer(t, "nameserver", "--data", dataDir, "--listen", "127.0.0.1:0", "--metrics", "")

	conn := dialNameServer(t, ns.addr)
	ctx := context.Background()
	for c := range clients {
		r, err := conn.Mkdir(ctx, &bfspb.MkdirRequest{Path: fmt.Sprintf("/storm/c%d", c), Parents: true})
		if err != nil || r.Status != bfspb.StatusCode_OK {
			t.Fatalf("mkdir: %v %v", r, err)
		}
	}

	// Each client creates files until a create fails (the server is gone).
	var (
		mu    sync.Mutex
		acked []string
		total atomic.Int64
		wg    sync.WaitGroup
	)
	enough := make(chan struct{})
	var enoughOnce sync.Once
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := dialNameServer(t, ns.addr)
			for i := 0; ; i++ {
				p := fmt.Sprintf("/storm/c%d/f%06d", c, i)
				r, err := cl.Create(ctx, &bfspb.CreateRequest{Path: p})
				if err != nil {
					return
				}
				if r.Status != bfspb.StatusCode_OK {
					t.Errorf("create %s: %v %s", p, r.Status, r.Message)
					return
				}
				mu.Lock()
				acked = append(acked, p)
				mu.Unlock()
				if total.Add(1) == 2000 {
					enoughOnce.Do(func() { close(enough) })
				}
			}
		}()
	}
	<-enough
	ns.kill()
	wg.Wait()
	t.Logf("acknowledged creates before kill -9: %d", len(acked))

	ns = startLoneNameServer(t, "nameserver", "--data", dataDir, "--listen", "127.0.0.1:0", "--metrics", "")
	conn = dialNameServer(t, ns.addr)
	lost := 0
	for _, p := range acked {
		r, err := conn.Stat(ctx, &bfspb.StatRequest{Path: p})
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		if r.Status != bfspb.StatusCode_OK {
			lost++
			t.Errorf("acknowledged create of %s lost: %v", p, r.Status)
		}
	}
	t.Logf("lost acknowledged creates: %d", lost)
	if lost != 0 {
		t.Fatalf("%d of %d acknowledged creates lost", lost, len(acked))
	}
}
