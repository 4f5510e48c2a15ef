package dirlock

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the transcript tests")

// TestTranscripts runs testdata/*.txt: each block is a command, "----",
// and the expected output, separated from the next by a blank line. Run
// with -rewrite to regenerate the expected outputs after a deliberate
// change; review the diff.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runTranscript(t, f) })
	}
}

type step struct{ cmd, want string }

func parseTranscript(t *testing.T, text string) []step {
	var steps []step
	for _, block := range strings.Split(strings.TrimSpace(text), "\n\n") {
		cmd, want, ok := strings.Cut(block, "\n----\n")
		if !ok {
			cmd, ok = strings.CutSuffix(block, "\n----")
			if !ok {
				t.Fatalf("block without ----: %q", block)
			}
		}
		steps = append(steps, step{cmd: strings.TrimSpace(cmd), want: want})
	}
	return steps
}

func runTranscript(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	steps := parseTranscript(t, string(b))
	m := &machine{table: NewTable()}
	var out strings.Builder
	for _, s := range steps {
		got := m.do(s.cmd)
		if !*rewrite && got != s.want {
			t.Errorf("%s\ngot:\n%s\nwant:\n%s", s.cmd, got, s.want)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", s.cmd, got)
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimSuffix(out.String(), "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// machine drives a Table the way the nameserver does: decide, then record.
type machine struct {
	table *Table
	epoch Epoch
}

var t0 = time.Unix(0, 0)

func (m *machine) do(line string) string {
	f := strings.Fields(line)
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	switch f[0] {
	case "lock":
		held, err := m.table.CanLock(arg(1), SessionID(arg(2)))
		switch {
		case err != nil:
			return describe(err)
		case held != nil:
			return fmt.Sprintf("held already, epoch=%d", held.Epoch)
		}
		m.epoch++
		m.table.Set(Lock{Path: arg(1), Status: Locked, Holder: "h-" + arg(2), Session: SessionID(arg(2)), Epoch: m.epoch, Since: t0})
		return fmt.Sprintf("granted epoch=%d", m.epoch)
	case "unlock":
		force, epoch := false, Epoch(0)
		for _, o := range f[3:] {
			if o == "force" {
				force = true
			} else if v, ok := strings.CutPrefix(o, "epoch="); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				epoch = Epoch(n)
			}
		}
		l, err := m.table.CanUnlock(arg(1), SessionID(arg(2)), force, epoch)
		if err != nil {
			return describe(err)
		}
		var paths []string
		for _, s := range m.table.Subtree(l.Path) {
			s.Status = Cleaning
			m.table.Set(s)
			paths = append(paths, s.Path)
		}
		return "cleaning " + strings.Join(paths, " ")
	case "cleaned":
		for _, s := range m.table.Subtree(arg(1)) {
			m.table.Remove(s.Path)
		}
		return "unlocked"
	case "check":
		return describe(m.table.Check(arg(1), SessionID(arg(2))))
	case "checktree":
		return describe(m.table.CheckSubtree(arg(1), SessionID(arg(2))))
	case "move":
		return describe(m.table.CheckMove(arg(1), SessionID(arg(2))))
	case "list":
		prefix := arg(1)
		if prefix == "" {
			prefix = "/"
		}
		var lines []string
		for _, l := range m.table.List(prefix, false, 0) {
			lines = append(lines, fmt.Sprintf("%s %s %s epoch=%d", l.Path, l.Status, l.Session, l.Epoch))
		}
		if len(lines) == 0 {
			return "(none)"
		}
		return strings.Join(lines, "\n")
	case "held":
		var paths []string
		for _, l := range m.table.Held(SessionID(arg(1))) {
			paths = append(paths, l.Path)
		}
		return "held: " + strings.Join(paths, " ")
	}
	return "unknown command " + f[0]
}

func describe(err error) string {
	var le *LockedError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &le) && errors.Is(err, ErrCleaning):
		return fmt.Sprintf("CLEANING %s epoch=%d", le.Lock.Path, le.Lock.Epoch)
	case errors.As(err, &le) && le.Move:
		return fmt.Sprintf("LOCKED %s by %s epoch=%d (move)", le.Lock.Path, le.Lock.Holder, le.Lock.Epoch)
	case errors.As(err, &le):
		return fmt.Sprintf("LOCKED %s by %s epoch=%d", le.Lock.Path, le.Lock.Holder, le.Lock.Epoch)
	case errors.Is(err, ErrUnlocked):
		return "UNLOCKED"
	case errors.Is(err, ErrStaleEpoch):
		return "STALE_EPOCH"
	}
	return "error: " + err.Error()
}
