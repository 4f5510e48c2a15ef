package bfscmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/cluster/testcluster"
)

// groupStatus is `bfs cluster status -o json`.
type groupStatus struct {
	Leader  string `json:"leader"`
	Members []struct {
		Name          string `json:"name"`
		ClientAddress string `json:"client_address"`
		Reachable     bool   `json:"reachable"`
		Error         string `json:"error"`
		Role          string `json:"role"`
		Voter         bool   `json:"voter"`
	} `json:"members"`
}

func parseGroupStatus(t *testing.T, out string) groupStatus {
	t.Helper()
	var st groupStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	return st
}

// bfsGroup runs a command against every nameserver of c.
func bfsGroup(t *testing.T, c *testcluster.Cluster, args ...string) result {
	t.Helper()
	return run(t, append([]string{"--nameserver", strings.Join(c.NameServerAddrs(), ","), "--certs-dir", c.CertsDir()}, args...)...)
}

// TestClusterStatusWithoutMajority: bfs cluster status of a group of
// three lists each member and its leader; once two members are gone it
// says that no member leads, shows the members it cannot reach, and exits
// 1; and a mutation answers UNAVAILABLE (exit 1, "unavailable") rather
// than hanging, once the client's patience for a leader is spent.
func TestClusterStatusWithoutMajority(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithNameServers(3))
	r := bfsGroup(t, c, "cluster", "status", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	st := parseGroupStatus(t, r.stdout)
	require.Len(t, st.Members, 3)
	require.Equal(t, sandbox.NameServerName(c.LeaderIndex()), st.Leader)
	r = bfsGroup(t, c, "cluster", "status")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^cluster \S+, leader ns\d$`, r.stdout)
	r = bfsGroup(t, c, "mkdir", "/before")
	require.Equal(t, 0, r.code, r.stderr)
	leader := c.LeaderIndex()
	survivor := (leader + 1) % 3
	for i := range 3 {
		if i != survivor {
			require.NoError(t, c.Sandbox.StopNameServer(i))
		}
	}
	r = run(t, "--nameserver", c.NameServerAddrs()[survivor], "--certs-dir", c.CertsDir(), "cluster", "status")
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "leader none (an election, or no majority of the voters is reachable)")
	require.Equal(t, 2, strings.Count(r.stdout, "unreachable"), r.stdout)
	require.Contains(t, r.stderr, "no nameserver of the group leads")
	r = run(t, "--nameserver", c.NameServerAddrs()[survivor], "--certs-dir", c.CertsDir(), "cluster", "status", "-o", "json")
	require.Equal(t, 1, r.code)
	st = parseGroupStatus(t, r.stdout)
	require.Empty(t, st.Leader)
	reached := 0
	for _, m := range st.Members {
		if m.Reachable {
			reached++
			require.NotEqual(t, "leader", m.Role)
		} else {
			require.NotEmpty(t, m.Error, "member %s unreachable without a reason", m.Name)
		}
	}
	require.Equal(t, 1, reached)

	start := time.Now()
	r = bfsGroup(t, c, "mkdir", "/after")
	t.Logf("mkdir without a majority: exit %d after %v: %s", r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	require.Equal(t, 1, r.code)
	require.Regexp(t, `(?i)unavailable`, r.stderr)
}

var sandboxNameServerRE = regexp.MustCompile(`(?m)^  nameserver +(127\.0\.0\.1:\d+) .*\((ns\d)\)$`)

// TestSandboxThreeNameServers: bfs sandbox --nameservers 3 starts a group
// of three and serves: bfs cluster status finds the three members and a
// leader, and a file put through the group reads back.
func TestSandboxThreeNameServers(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon("sandbox", "--dir", dir, "--listen", "127.0.0.1:0", "--chunkserver-port", "0", "--http-port", "0", "--nameservers", "3")
	var printed strings.Builder
	for {
		line, err := d.out.ReadString('\n')
		require.NoError(t, err, "printed:\n%s\nstderr:\n%s", printed.String(), d.stderr.String())
		if strings.Contains(line, "Ctrl-C stops the sandbox") {
			break
		}
		printed.WriteString(line)
	}
	ms := sandboxNameServerRE.FindAllStringSubmatch(printed.String(), -1)
	require.Len(t, ms, 3, printed.String())
	var addrs []string
	for i, m := range ms {
		require.Equal(t, sandbox.NameServerName(i), m[2])
		addrs = append(addrs, m[1])
	}
	tool := func(args ...string) result {
		return run(t, append([]string{"--nameserver", strings.Join(addrs, ","), "--certs-dir", sandbox.CertsDir(dir)}, args...)...)
	}
	r := tool("cluster", "status", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	st := parseGroupStatus(t, r.stdout)
	require.Len(t, st.Members, 3)
	require.NotEmpty(t, st.Leader)
	// Each member publishes its client address in the group's member
	// table within a second or so of the start.
	require.Eventually(t, func() bool {
		r = tool("cluster", "status", "-o", "json")
		st = parseGroupStatus(t, r.stdout)
		for _, m := range st.Members {
			if !m.Reachable || !m.Voter || !slices.Contains(addrs, m.ClientAddress) {
				return false
			}
		}
		return r.code == 0
	}, 30*time.Second, 50*time.Millisecond, "bfs cluster status: %s", r.stdout)
	src := filepath.Join(t.TempDir(), "hello.txt")
	require.NoError(t, os.WriteFile(src, []byte("hello, group\n"), 0o644))
	r = tool("put", src, "/hello.txt")
	require.Equal(t, 0, r.code, r.stderr)
	r = tool("cat", "/hello.txt")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "hello, group\n", r.stdout)
	d.stop(t)
}
