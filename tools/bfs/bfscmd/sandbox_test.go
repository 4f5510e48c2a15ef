package bfscmd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/tools/bfs/bfscmd"
)

// TestSandboxServesHTTP: bfs sandbox prints where each daemon serves its
// HTTP port, and each does: the nameserver its status page, its JSON and
// its metrics, every chunkserver its metrics.
func TestSandboxServesHTTP(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		defer pw.Close()
		exited <- bfscmd.Main(ctx, []string{"sandbox", "--dir", t.TempDir(), "--listen", "127.0.0.1:0",
			"--chunkserver-port", "0", "--http-port", "0"}, pw, &stderr)
	}()
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.Contains(sc.Text(), "Ctrl-C stops the sandbox") {
		printed.WriteString(sc.Text() + "\n")
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	out := printed.String()
	page := regexp.MustCompile(`(?m)^  nameserver +127\.0\.0\.1:\d+ +status page (http://127\.0\.0\.1:\d+/) +metrics (http://127\.0\.0\.1:\d+/metrics)$`).FindStringSubmatch(out)
	require.NotNil(t, page, "no nameserver line in:\n%s\nstderr:\n%s", out, stderr.String())
	chunkservers := regexp.MustCompile(`(?m)^  chunkserver +127\.0\.0\.1:\d+ +metrics (http://127\.0\.0\.1:\d+/metrics) +\(\d\)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, chunkservers, 3, out)

	get := func(url string) string {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, url)
		return string(body)
	}
	require.Contains(t, get(page[1]), "single nameserver")
	var status struct {
		Chunkservers struct{ Live int } `json:"chunkservers"`
	}
	require.NoError(t, json.Unmarshal([]byte(get(page[1]+"api/status")), &status))
	require.Equal(t, 3, status.Chunkservers.Live)
	require.Contains(t, get(page[2]), "bfs_nameserver_dir_locks")
	for _, cs := range chunkservers {
		require.Contains(t, get(cs[1]), "bfs_chunkserver_blocks")
	}

	cancel()
	select {
	case code := <-exited:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the sandbox did not stop")
	}
}
