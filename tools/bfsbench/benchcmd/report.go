package benchcmd

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bfs-go/bfs/internal/bench"
)

// column is one column of the results table; a column whose cells are all
// empty is left out, so every benchmark shares one table format without
// printing columns it has no use for.
type column struct {
	header string
	cell   func(r bench.Result, t *table) string
}

// table is the rendering state of one results table.
type table struct {
	// base maps a workload (name and parameter) to its one-client
	// throughput, for the speedup column.
	base map[string]float64
	// notes are the distinct notes, numbered in order of appearance.
	notes []string
}

var columns = []column{
	{"workload", func(r bench.Result, _ *table) string { return r.Name }},
	{"clients", func(r bench.Result, _ *table) string { return strconv.Itoa(r.Clients) }},
	{"param", func(r bench.Result, _ *table) string { return r.Param }},
	{"n", func(r bench.Result, _ *table) string { return count(r.Ops, r.Unit != "x") }},
	{"rate", func(r bench.Result, _ *table) string { return rate(r) }},
	{"p50", func(r bench.Result, _ *table) string { return latency(r, r.P50) }},
	{"p90", func(r bench.Result, _ *table) string { return latency(r, r.P90) }},
	{"p99", func(r bench.Result, _ *table) string { return latency(r, r.P99) }},
	{"vs 1 client", func(r bench.Result, t *table) string { return t.speedup(r) }},
	{"errors", func(r bench.Result, _ *table) string { return count(r.Errors, r.Unit != "x") }},
	{"note", func(r bench.Result, t *table) string { return t.note(r) }},
}

// count prints n, except a zero that does not apply (a ratio has no
// operations or errors of its own).
func count(n int64, applies bool) string {
	if n == 0 && !applies {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

func key(r bench.Result) string { return r.Name + "\x00" + r.Param }

// rate is the result's headline figure: its Value in Unit, or its
// throughput, or "" for a latency distribution.
func rate(r bench.Result) string {
	switch {
	case r.Unit == "x":
		return fmt.Sprintf("%.2fx", r.Value)
	case r.Unit == countUnit:
		return fmt.Sprintf("%.0f", r.Value)
	case r.Unit != "":
		return fmt.Sprintf("%.1f %s", r.Value, r.Unit)
	case r.Elapsed > 0:
		return fmt.Sprintf("%.0f ops/s", r.OpsPerSec())
	}
	return ""
}

func latency(r bench.Result, d time.Duration) string {
	if !r.HasLatency() {
		return ""
	}
	return ms(d)
}

func (t *table) speedup(r bench.Result) string {
	if r.Unit != "" || r.Elapsed <= 0 || r.Clients == 1 {
		return ""
	}
	if b := t.base[key(r)]; b > 0 {
		return fmt.Sprintf("%.1fx", r.OpsPerSec()/b)
	}
	return ""
}

func (t *table) note(r bench.Result) string {
	if r.Note == "" {
		return ""
	}
	for i, n := range t.notes {
		if n == r.Note {
			return fmt.Sprintf("[%d]", i+1)
		}
	}
	t.notes = append(t.notes, r.Note)
	return fmt.Sprintf("[%d]", len(t.notes))
}

// printTable prints results as one table, then the notes its rows refer
// to.
func (c *common) printTable(results []bench.Result) error {
	return renderTable(c.stdout, results)
}

func renderTable(w io.Writer, results []bench.Result) error {
	t := &table{base: map[string]float64{}}
	for _, r := range results {
		if r.Clients == 1 && r.Unit == "" && r.Elapsed > 0 {
			t.base[key(r)] = r.OpsPerSec()
		}
	}
	cells := make([][]string, len(results))
	used := make([]bool, len(columns))
	for i, r := range results {
		cells[i] = make([]string, len(columns))
		for j, col := range columns {
			cells[i][j] = col.cell(r, t)
			used[j] = used[j] || cells[i][j] != ""
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	writeRow(tw, used, func(j int) string { return columns[j].header })
	for _, row := range cells {
		writeRow(tw, used, func(j int) string {
			if row[j] == "" {
				return "-"
			}
			return row[j]
		})
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, n := range t.notes {
		if _, err := fmt.Fprintf(w, "[%d] %s\n", i+1, n); err != nil {
			return err
		}
	}
	return nil
}

func writeRow(w io.Writer, used []bool, cell func(j int) string) {
	var b strings.Builder
	for j := range columns {
		if used[j] {
			b.WriteString(cell(j))
			b.WriteByte('\t')
		}
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

// csvHeader is the CSV layout: the first nine columns are those bfsbench
// always wrote; later ones were added at the end so scripts reading by
// position keep working.
var csvHeader = []string{"workload", "clients", "ops", "errors", "elapsed_s", "ops_per_s", "p50_ms", "p90_ms", "p99_ms",
	"param", "value", "unit", "note"}

// writeCSV writes results to the --csv file, if one was asked for.
func (c *common) writeCSV(results []bench.Result) error {
	if c.csvPath == "" {
		return nil
	}
	f, err := os.Create(c.csvPath)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(csvHeader)
	for _, r := range results {
		w.Write(csvRow(r))
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func csvRow(r bench.Result) []string {
	msf := func(d time.Duration) string { return strings.TrimSuffix(ms(d), "ms") }
	value := ""
	if r.Unit != "" {
		value = strconv.FormatFloat(r.Value, 'f', 3, 64)
	}
	return []string{r.Name, strconv.Itoa(r.Clients), strconv.FormatInt(r.Ops, 10), strconv.FormatInt(r.Errors, 10),
		fmt.Sprintf("%.3f", r.Elapsed.Seconds()), fmt.Sprintf("%.1f", r.OpsPerSec()),
		msf(r.P50), msf(r.P90), msf(r.P99), r.Param, value, r.Unit, r.Note}
}
