package statuspage_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/lockfill"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// BenchmarkAtScale times the status page's first pages over HTTP on a
// nameserver holding 100,000 locks (BFS_STATUS_LOCKS overrides it) held
// by 100 sessions, each lock with one history entry: the summary page,
// the first page of locks as HTML and as JSON, the first pages of
// sessions and history, and the summary and locks pages loaded by
// headless Chromium (navigation to the load event, scripts run). Every
// one must come back in well under a second.
func BenchmarkAtScale(b *testing.B) {
	n := 100_000
	if s := os.Getenv("BFS_STATUS_LOCKS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("BFS_STATUS_LOCKS=%q: %v", s, err)
		}
	}
	cl := testcluster.Start(b, testcluster.Insecure(), testcluster.WithChunkservers(3), testcluster.WithHTTP())
	conn, err := grpc.NewClient(cl.NameServerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ns := bfspb.NewNameServerClient(conn)
	ctx := context.Background()
	filled, err := lockfill.Fill(ctx, ns, lockfill.Spec{Root: "/tera", Locks: n, Sessions: 100, Workers: 64, History: true})
	if err != nil {
		b.Fatal(err)
	}
	defer filled.Stop()
	for _, page := range []struct{ name, path string }{
		{"summary", "/"},
		{"locks", "/locks"},
		{"locks-json", "/api/locks"},
		{"sessions", "/sessions"},
		{"history", "/history"},
	} {
		b.Run(page.name, func(b *testing.B) {
			var size int64
			for b.Loop() {
				resp, err := http.Get("http://" + cl.NameServerHTTPAddr() + page.path)
				if err != nil {
					b.Fatal(err)
				}
				size, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %v %v", page.path, resp.Status, err)
				}
			}
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
	for _, page := range []struct{ name, path string }{{"summary-chromium", "/"}, {"locks-chromium", "/locks"}} {
		b.Run(page.name, func(b *testing.B) {
			ctx := browser(b)
			for b.Loop() {
				if err := chromedp.Do(ctx, chromedp.Navigate("http://"+cl.NameServerHTTPAddr()+page.path)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
