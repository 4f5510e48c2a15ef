package benchcmd

import (
	"fmt"
	"strings"
	"testing"
)

// The leader changes are read from the members' Prometheus text: the
// unlabelled counter named, not one whose name it starts.
func TestMetricValue(t *testing.T) {
	text := `# HELP bfs_nameserver_raft_leader_changes_total Times this member became leader or stopped being one.
# TYPE bfs_nameserver_raft_leader_changes_total counter
bfs_nameserver_raft_leader_changes_total_other 7
bfs_nameserver_raft_leader_changes_total 3
bfs_nameserver_raft_term 2
`
	v, err := metricValue(text, "bfs_nameserver_raft_leader_changes_total")
	if err != nil || v != 3 {
		t.Errorf("got %v, %v; want 3", v, err)
	}
	if _, err := metricValue(text, "bfs_nameserver_missing"); err == nil {
		t.Error("a missing metric read as a value")
	}
}

// A daemon's address is the first "<kind> listening on ADDR ..." line of
// its stdout, whatever the writes' boundaries.
func TestLineWatch(t *testing.T) {
	found := make(chan string, 1)
	w := &lineWatch{prefix: "nameserver listening on ", found: found}
	out := "starting\nnameserver listening on 127.0.0.1:4242 (data /d)\nnameserver listening on 127.0.0.1:1 (data /e)\n"
	for i := 0; i < len(out); i += 5 {
		if _, err := fmt.Fprint(w, out[i:min(i+5, len(out))]); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case addr := <-found:
		if addr != "127.0.0.1:4242" {
			t.Errorf("address %q", addr)
		}
	default:
		t.Fatal("no address found")
	}
	if strings.Contains(string(w.buf), "listening") || len(found) != 0 {
		t.Error("lines after the first kept or sent")
	}
}
