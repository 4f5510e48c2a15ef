package statuspage_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/sdk"
)

// docsDir names the folder TestDocsScreenshots writes to.
const docsDir = "BFS_DOCS_SCREENSHOTS"

// TestDocsScreenshots writes the screenshots README.md shows, of a small
// cluster at work: tablet servers holding their tablets and locking and
// unlocking, a master refused, a chunkserver being decommissioned (its
// replicas copied away), and a tablet force-unlocked with 100 files open,
// 60 of them still to seal. Run it with
//
//	BFS_DOCS_SCREENSHOTS=$PWD/docs go test -run TestDocsScreenshots -v ./nameserver/statuspage
func TestDocsScreenshots(t *testing.T) {
	dir := os.Getenv(docsDir)
	if dir == "" {
		t.Skipf("set %s to the folder for the screenshots README.md shows (docs/)", docsDir)
	}
	ctx := browser(t)
	gate := newSealGate(t)
	cl := testcluster.Start(t, testcluster.Insecure(), testcluster.WithChunkservers(4), testcluster.WithHTTP(),
		testcluster.WithNameServerConfig(func(c *nameserver.Config) {
			c.DeadTimeout = time.Minute
			c.TestingKnobs.DialChunkserver = gate.dial
			c.TestingKnobs.StatusSampleInterval = 500 * time.Millisecond // the charts span a minute
		}))
	t.Cleanup(func() { gate.release() })
	bg := context.Background()
	master := dialSDK(t, cl, "master-10.0.0.2")
	servers := make([]*sdk.Client, 5)
	for i := range servers {
		servers[i] = dialSDK(t, cl, fmt.Sprintf("tabletserver-10.0.1.%d", 11+i))
	}
	tablet := func(i int) string { return fmt.Sprintf("/tera/users/tablet%05d", i) }
	for i := range 24 {
		s := servers[i%len(servers)]
		require.NoError(t, s.MkdirAll(bg, tablet(i)+"/lg0", 0))
		_, err := s.LockDir(bg, tablet(i))
		require.NoError(t, err)
		if i%3 == 0 {
			_, err = s.LockDir(bg, tablet(i)+"/lg0")
			require.NoError(t, err)
		}
	}
	for i := range 40 { // data for the decommission to copy
		w, err := servers[0].Create(bg, fmt.Sprintf("%s/sst%03d", tablet(0), i))
		require.NoError(t, err)
		_, err = w.Write(make([]byte, 1<<20))
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}

	// A minute of work: tablets moving between servers, the master
	// refused now and then, a chunkserver drained halfway through.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		s, p := servers[i], fmt.Sprintf("/tera/moving/t%d", i)
		require.NoError(t, s.MkdirAll(bg, p, 0))
		wg.Go(func() {
			tick := time.NewTicker(time.Duration(150+100*i) * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				l, err := s.LockDir(bg, p)
				if err != nil {
					t.Errorf("lock %s: %v", p, err)
					return
				}
				if _, err := master.LockDir(bg, p); err == nil {
					t.Errorf("%s granted twice", p)
				}
				if err := l.Unlock(bg); err != nil {
					t.Errorf("unlock %s: %v", p, err)
					return
				}
			}
		})
	}
	time.Sleep(25 * time.Second) // let the charts fill: this test shows time passing
	loc, err := master.Locate(bg, tablet(0)+"/sst000")
	require.NoError(t, err)
	_, err = master.Decommission(bg, loc.Blocks[0].Replicas[0])
	require.NoError(t, err)
	time.Sleep(30 * time.Second)
	defer wg.Wait()
	defer close(stop) // the work goes on while the screenshots are taken

	// The master takes tablet 7 from its server, which has 100 files open.
	victim := tablet(7)
	_, blocks := openFiles(t, servers[7%len(servers)], victim, 100)
	gate.hold(blocks...)
	_, err = master.UnlockDir(bg, victim, sdk.Force())
	require.NoError(t, err)
	gate.release(blocks[:40]...)
	eventually(t, "60 files pending", func() bool {
		l, err := master.GetDirLock(bg, victim)
		require.NoError(t, err)
		return len(l.Pending) == 60
	})

	base := "http://" + cl.NameServerHTTPAddr()
	for _, shot := range []struct{ path, name string }{
		{"/", "status-summary.png"},
		{"/locks?prefix=/tera/users&limit=14", "status-locks-cleaning.png"},
		{"/lock?path=" + victim, "status-lock.png"},
	} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+shot.path)))
		screenshot(t, ctx, dir, shot.name, false)
	}
}
