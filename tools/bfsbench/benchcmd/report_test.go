package benchcmd

import (
	"strings"
	"testing"
	"time"

	"github.com/bfs-go/bfs/internal/bench"
)

func TestTableOmitsUnusedColumnsAndNumbersNotes(t *testing.T) {
	results := []bench.Result{
		{Name: "op", Clients: 1, Ops: 100, Elapsed: time.Second, P50: time.Millisecond, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond},
		{Name: "op", Clients: 4, Ops: 300, Elapsed: time.Second, P50: time.Millisecond, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond},
	}
	var b strings.Builder
	if err := renderTable(&b, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if strings.Join(header, " ") != "workload clients n rate p50 p90 p99 vs 1 client errors" {
		t.Errorf("header %q: want no param or note column", header)
	}
	if !strings.Contains(out, "100 ops/s") || !strings.Contains(out, "3.0x") {
		t.Errorf("want the throughput and the speedup over one client:\n%s", out)
	}

	results = []bench.Result{
		{Name: "put", Clients: 1, Param: "trial 1", Ops: 1, Value: 123.45, Unit: "MB/s", Note: "put note"},
		{Name: "get", Clients: 1, Param: "trial 1", Ops: 1, Value: 200, Unit: "MB/s", Note: "get note"},
		{Name: "put", Clients: 1, Param: "trial 2", Ops: 1, Value: 100, Unit: "MB/s", Note: "put note"},
		{Name: "ratio", Clients: 1, Value: 0.5, Unit: "x", Note: "ratio note"},
	}
	b.Reset()
	if err := renderTable(&b, results); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	for _, want := range []string{"123.5 MB/s", "0.50x", "[1] put note\n", "[2] get note\n", "[3] ratio note\n", "param"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "p50") || strings.Contains(out, "[4]") {
		t.Errorf("a table without latencies has no percentile columns, and a note is numbered once:\n%s", out)
	}
}

func TestCSVRowMatchesHeader(t *testing.T) {
	r := bench.Result{Name: "fence", Clients: 1, Param: "files=10", Ops: 3, P50: time.Millisecond, P99: 2 * time.Millisecond, Note: "n"}
	row := csvRow(r)
	if len(row) != len(csvHeader) {
		t.Fatalf("%d fields for %d columns", len(row), len(csvHeader))
	}
	if row[0] != "fence" || row[6] != "1.000" || row[9] != "files=10" || row[12] != "n" {
		t.Errorf("row %q", row)
	}
}

// every reports periodically until stopped, and stop waits for a report
// under way: nothing is reported after it returns.
func TestEveryReportsUntilStopped(t *testing.T) {
	calls := make(chan time.Duration)
	var after bool
	stop := every(time.Millisecond, func(elapsed time.Duration) {
		if after {
			t.Error("reported after stop returned")
		}
		calls <- elapsed
	})
	first, second := <-calls, <-calls
	if first <= 0 || second <= first {
		t.Errorf("elapsed %v then %v, want growing", first, second)
	}
	go func() {
		for range calls { // a report may be under way as stop is called
		}
	}()
	stop()
	after = true
	close(calls)
}
