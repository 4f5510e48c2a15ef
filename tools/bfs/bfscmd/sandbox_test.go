package bfscmd_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSandboxServesHTTP: bfs sandbox prints where each daemon serves its
// HTTP port, and each does: the nameserver its status page, its JSON and
// its metrics, every chunkserver its metrics.
func TestSandboxServesHTTP(t *testing.T) {
	d := startDaemon("sandbox", "--insecure", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--chunkserver-port", "0", "--http-port", "0")
	var printed strings.Builder
	for {
		line, err := d.out.ReadString('\n')
		require.NoError(t, err, "printed:\n%s", printed.String())
		if strings.Contains(line, "Ctrl-C stops the sandbox") {
			break
		}
		printed.WriteString(line)
	}
	out := printed.String()
	page := regexp.MustCompile(`(?m)^  nameserver +127\.0\.0\.1:\d+ +status page (http://127\.0\.0\.1:\d+/) +metrics (http://127\.0\.0\.1:\d+/metrics) +\(ns1\)$`).FindStringSubmatch(out)
	require.NotNil(t, page, "no nameserver line in:\n%s", out)
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
	require.Contains(t, get(page[1]), "leader <b>ns1</b>")
	var status struct {
		Chunkservers struct{ Live int } `json:"chunkservers"`
	}
	require.NoError(t, json.Unmarshal([]byte(get(page[1]+"api/status")), &status))
	require.Equal(t, 3, status.Chunkservers.Live)
	require.Contains(t, get(page[2]), "bfs_nameserver_dir_locks")
	for _, cs := range chunkservers {
		require.Contains(t, get(cs[1]), "bfs_chunkserver_blocks")
	}

	d.stop(t)
}
