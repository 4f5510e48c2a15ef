package statuspage_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/nameserver/statuspage"
	"github.com/bfs-go/bfs/sdk"
)

// requireChromium is set by .ci/run once it has installed Chromium: the
// browser tests then fail rather than skip without it.
const requireChromium = "BFS_REQUIRE_CHROMIUM"

// chromiumPath finds Debian's chromium, or skips the test saying why.
func chromiumPath(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(requireChromium) != "" {
		t.Fatalf("no chromium on the PATH, and %s is set", requireChromium)
	}
	t.Skip("no chromium on the PATH: install Debian's chromium (apt-get install -y chromium; .ci/run does) to render the status page")
	return ""
}

// browser starts headless Chromium with the flags this kind of machine
// needs (no sandbox as root, no GPU, no network of its own, a fresh
// profile) and returns its chromedp context; it stops at cleanup.
func browser(t testing.TB) context.Context {
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser, which lives as long as ctx.
	require.NoError(t, chromedp.Do(ctx), "starting %s", path)
	return ctx
}

// screenshot writes the page as a PNG in dir (the whole page, or what
// the window shows) and checks it decodes.
func screenshot(t testing.TB, ctx context.Context, dir, name string, whole bool) {
	t.Helper()
	shot := chromedp.CaptureScreenshot()
	if whole {
		shot = chromedp.FullScreenshot(100)
	}
	buf, err := chromedp.Run(ctx, shot)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(buf))
	require.NoError(t, err, "%s is no PNG", name)
	require.Greater(t, img.Bounds().Dx(), 600)
	require.Greater(t, img.Bounds().Dy(), 300)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, buf, 0o644))
	t.Logf("screenshot %s: %dx%d, %d bytes", p, img.Bounds().Dx(), img.Bounds().Dy(), len(buf))
}

// rowText is the text of the cell of class in the locks table's row of
// path, "" while there is no such row.
func rowText(t testing.TB, ctx context.Context, path, class string) string {
	t.Helper()
	js := fmt.Sprintf(`(function(){ var c = document.querySelector('tr[data-lock=%q] .%s'); return c ? c.textContent.trim() : ""; })()`, path, class)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	require.NoError(t, err)
	return s
}

// TestForcedUnlockInBrowser renders the locks page in headless Chromium
// while a master force-unlocks a tablet directory with 100 files open for
// write. The seals are let through in steps: the page's row of the
// directory follows the cleaning live (CLEANING, its pending files
// falling 100, 60, 0, then UNLOCKED), and at every step the JSON endpoint
// agrees with what the SDK sees.
func TestForcedUnlockInBrowser(t *testing.T) {
	ctx := browser(t)
	const dir, files = "/tera/t1", 100
	gate := newSealGate(t)
	closes := newLatch() // holds the files' closes once every replica has reported
	cl := testcluster.Start(t, testcluster.Insecure(), testcluster.WithChunkservers(3), testcluster.WithHTTP(),
		testcluster.WithNameServerConfig(func(c *nameserver.Config) {
			c.DeadTimeout = time.Minute // a held seal must not count as a dead chunkserver
			c.TestingKnobs.DialChunkserver = gate.dial
			c.TestingKnobs.BeforeClose = func(uint64) { closes.waitOpen() }
		}))
	t.Cleanup(func() { gate.release(); closes.open() }) // before the cluster stops
	tablet, master := dialSDK(t, cl, "tablet-server-1"), dialSDK(t, cl, "master")
	bg := context.Background()
	require.NoError(t, tablet.MkdirAll(bg, dir, 0))
	_, err := tablet.LockDir(bg, dir)
	require.NoError(t, err)
	_, blocks := openFiles(t, tablet, dir, files)
	gate.hold(blocks...)

	un, err := master.UnlockDir(bg, dir, sdk.Force())
	require.NoError(t, err)
	require.Equal(t, sdk.Cleaning, un.Status)
	page := "http://" + cl.NameServerHTTPAddr() + "/locks?prefix=" + dir
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(`tr[data-lock="/tera/t1"]`)))

	shots := os.Getenv("BFS_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	step := func(state string, pending int) {
		t.Helper()
		want := func() *sdk.DirLock {
			l, err := master.GetDirLock(bg, dir)
			require.NoError(t, err)
			return l
		}
		eventually(t, fmt.Sprintf("the SDK to see %s with %d pending", state, pending), func() bool {
			l := want()
			return stateOf(l.Status) == state && len(l.Pending) == pending
		})
		eventually(t, fmt.Sprintf("the page to show %s with %d pending", state, pending), func() bool {
			got := rowText(t, ctx, dir, "state")
			if state == "UNLOCKED" {
				return got == state
			}
			return got == state && rowText(t, ctx, dir, "pending") == strconv.Itoa(pending)
		})
		l := want()
		d := lockJSON(t, cl, dir)
		requireAgrees(t, l, d.Lock)
		require.Len(t, d.Pending, len(l.Pending))
		for i, p := range l.Pending {
			require.Equal(t, p.Path, d.Pending[i].Path)
			require.Equal(t, p.BlockID, d.Pending[i].BlockID)
			require.ElementsMatch(t, p.Replicas, d.Pending[i].Replicas)
		}
		var list statuspage.LockPage
		getJSON(t, cl, "/api/locks?prefix="+dir, &list)
		if state == "UNLOCKED" {
			require.Empty(t, list.Locks)
		} else {
			require.Len(t, list.Locks, 1)
			requireAgrees(t, l, list.Locks[0])
		}
		t.Logf("%s: %s, %d files pending: the page, its JSON and the SDK agree", dir, state, pending)
	}

	step("CLEANING", files)
	gate.release(blocks[:40]...)
	step("CLEANING", 60)
	screenshot(t, ctx, shots, "status-cleaning.png", true)
	gate.release()
	step("CLEANING", 0) // every replica sealed; the closes are held
	closes.open()
	step("UNLOCKED", 0)
	screenshot(t, ctx, shots, "status-unlocked.png", true)

	// The recent history has the forced unlock, by whom it was held.
	var h statuspage.HistoryPage
	getJSON(t, cl, "/api/history", &h)
	require.NotEmpty(t, h.Transitions)
	require.Equal(t, "UNLOCKED", h.Transitions[0].To, "newest first")
	forced := false
	for _, tr := range h.Transitions {
		forced = forced || tr.Path == dir && tr.From == "LOCKED" && tr.To == "CLEANING" && tr.Reason == "force" &&
			tr.Holder == "tablet-server-1" && tr.Epoch == un.Epoch
	}
	require.True(t, forced, "no forced unlock in %+v", h.Transitions)
}
