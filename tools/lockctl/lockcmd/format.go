package lockcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

// The JSON documents. Field names are part of lockctl's interface: scripts
// read them. Times are RFC 3339 (null when unknown), durations integer
// milliseconds.

type lockJSON struct {
	Path    string        `json:"path"`
	State   string        `json:"state"`
	Holder  string        `json:"holder"`
	Session string        `json:"session"`
	Epoch   uint64        `json:"epoch"`
	Since   *time.Time    `json:"since"`
	Pending []pendingJSON `json:"pending"`
}

type pendingJSON struct {
	Path     string   `json:"path"`
	BlockID  int64    `json:"block_id"`
	Replicas []string `json:"replicas"`
}

type eventJSON struct {
	lockJSON
	Previous string    `json:"previous"`
	Reason   string    `json:"reason"`
	Time     time.Time `json:"time"`
}

type historyJSON struct {
	Holder         string     `json:"holder"`
	Epoch          uint64     `json:"epoch"`
	LockedAt       *time.Time `json:"locked_at"`
	UnlockedAt     *time.Time `json:"unlocked_at"`
	DurationMs     int64      `json:"duration_ms"`
	Reason         string     `json:"reason"`
	FilesSealed    int64      `json:"files_sealed"`
	BytesTruncated int64      `json:"bytes_truncated"`
}

type sessionJSON struct {
	ID          string `json:"id"`
	Holder      string `json:"holder"`
	TTLMs       int64  `json:"ttl_ms"`
	RemainingMs int64  `json:"remaining_ms"`
	OpenFiles   int64  `json:"open_files"`
	// Locks are the first ones, LockCount how many in all.
	Locks     []string `json:"locks"`
	LockCount int64    `json:"lock_count"`
}

// known reports whether t is a time the nameserver sent (the SDK leaves
// an absent one zero).
func known(t time.Time) bool { return !t.IsZero() }

func timePtr(t time.Time) *time.Time {
	if !known(t) {
		return nil
	}
	u := t.UTC()
	return &u
}

func toLockJSON(d *sdk.DirLock) lockJSON {
	j := lockJSON{
		Path: d.Path, State: d.Status.String(), Holder: d.Holder, Session: d.SessionID, Epoch: d.Epoch,
		Since: timePtr(d.Since), Pending: []pendingJSON{},
	}
	for _, p := range d.Pending {
		j.Pending = append(j.Pending, pendingJSON{Path: p.Path, BlockID: p.BlockID, Replicas: nonNil(p.Replicas)})
	}
	return j
}

func toHistoryJSON(h sdk.LockHistoryEntry) historyJSON {
	return historyJSON{
		Holder: h.Holder, Epoch: h.Epoch, LockedAt: timePtr(h.LockedAt), UnlockedAt: timePtr(h.UnlockedAt),
		DurationMs: lockDuration(h).Milliseconds(), Reason: h.Reason,
		FilesSealed: h.FilesSealed, BytesTruncated: h.BytesTruncated,
	}
}

func toSessionJSON(s sdk.SessionInfo) sessionJSON {
	return sessionJSON{
		ID: s.ID, Holder: s.Holder, TTLMs: s.TTL.Milliseconds(), RemainingMs: s.Remaining.Milliseconds(),
		OpenFiles: s.OpenFiles, Locks: nonNil(s.Locks), LockCount: s.LockCount,
	}
}

// nonNil makes an empty list print as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func lockDuration(h sdk.LockHistoryEntry) time.Duration {
	if !known(h.LockedAt) || !known(h.UnlockedAt) {
		return 0
	}
	return h.UnlockedAt.Sub(h.LockedAt)
}

// writeJSON prints one JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

const timeLayout = "2006-01-02 15:04:05"

func formatTime(t time.Time) string {
	if !known(t) {
		return "-"
	}
	return t.Local().Format(timeLayout)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// field is s as tables and lines show it: control characters escaped
// (see package printable), "-" when empty. Errors are escaped as a whole
// when printed, so their text takes s raw.
func field(s string) string { return orDash(printable.String(s)) }

// writeStatus prints one lock, a field per line.
func writeStatus(w io.Writer, d *sdk.DirLock, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	fmt.Fprintf(tw, "Path:\t%s\n", printable.String(d.Path))
	fmt.Fprintf(tw, "State:\t%s\n", d.Status)
	if d.Status != sdk.Unlocked {
		fmt.Fprintf(tw, "Holder:\t%s\n", field(d.Holder))
		fmt.Fprintf(tw, "Session:\t%s\n", field(d.SessionID))
		fmt.Fprintf(tw, "Epoch:\t%d\n", d.Epoch)
		since := formatTime(d.Since)
		if known(d.Since) && !now.Before(d.Since) { // no "ago" across clock skew
			since += fmt.Sprintf(" (%s ago)", now.Sub(d.Since).Truncate(time.Second))
		}
		fmt.Fprintf(tw, "Since:\t%s\n", since)
	}
	if d.Status == sdk.Cleaning {
		fmt.Fprintf(tw, "Pending:\t%d file(s)\n", len(d.Pending))
	}
	_ = tw.Flush()
	for _, p := range d.Pending {
		fmt.Fprintf(w, "  %s\n", pendingLine(p))
	}
}

func pendingLine(p sdk.PendingFile) string {
	return fmt.Sprintf("%s  block %d  waiting for %s", printable.String(p.Path), p.BlockID, field(strings.Join(p.Replicas, ", ")))
}

// The listings' tables: a header and one tab-separated row per item.
const (
	lockHeader    = "PATH\tSTATE\tHOLDER\tEPOCH\tSESSION\tSINCE\tPENDING"
	historyHeader = "HOLDER\tEPOCH\tLOCKED-AT\tUNLOCKED-AT\tDURATION\tREASON\tFILES-SEALED\tBYTES-TRUNCATED"
	sessionHeader = "ID\tHOLDER\tTTL\tREMAINING\tOPEN-FILES\tLOCKS"
)

func lockRow(d *sdk.DirLock) string {
	pending := "-"
	if d.Status == sdk.Cleaning {
		pending = fmt.Sprintf("%d file(s)", len(d.Pending))
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%s",
		printable.String(d.Path), d.Status, field(d.Holder), d.Epoch, field(d.SessionID), formatTime(d.Since), pending)
}

func historyRow(h sdk.LockHistoryEntry) string {
	return fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d",
		field(h.Holder), h.Epoch, formatTime(h.LockedAt), formatTime(h.UnlockedAt),
		roundDuration(lockDuration(h)), field(h.Reason), h.FilesSealed, h.BytesTruncated)
}

func sessionRow(s sdk.SessionInfo) string {
	locks := strings.Join(s.Locks, ",")
	if int(s.LockCount) > len(s.Locks) {
		locks += fmt.Sprintf(",... (%d in all)", s.LockCount)
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s",
		field(s.ID), field(s.Holder), roundDuration(s.TTL), roundDuration(s.Remaining), s.OpenFiles, field(locks))
}

// tableBlock is how many rows of a listing's table are aligned together:
// the first rows print before a long listing has all arrived, and memory
// stays bounded.
const (
	tableBlock     = 1000
	tableBlockText = "1000"
)

// stream prints a listing as it arrives, at most limit items (0: all):
// with -o json one object (doc) per line; else a table, its header on top
// and its rows aligned a block at a time. It returns how many items it
// printed. A failure of the listing ends it, after what came before it.
func stream[T any](e *env, seq iter.Seq2[T, error], limit int, header string, row func(T) string, doc func(T) any) (int, error) {
	enc := json.NewEncoder(e.stdout)
	var tw *tabwriter.Writer
	flush := func() {
		if tw != nil {
			_ = tw.Flush()
		}
	}
	defer flush()
	n := 0
	for item, err := range seq {
		if err != nil {
			return n, err
		}
		if e.json() {
			if err := enc.Encode(doc(item)); err != nil {
				return n, err
			}
		} else {
			if n%tableBlock == 0 {
				flush()
				tw = tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
				if n == 0 {
					fmt.Fprintln(tw, header)
				}
			}
			fmt.Fprintln(tw, row(item))
		}
		if n++; n == limit {
			break
		}
	}
	return n, nil
}

// roundDuration keeps durations readable: milliseconds under a minute,
// seconds above.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// eventLine is one transition as watch prints it for people.
func eventLine(ev sdk.DirLockEvent, at time.Time) string {
	d := ev.Lock
	s := fmt.Sprintf("%s  %s  %s -> %s", at.Local().Format("15:04:05.000"), printable.String(d.Path), ev.Previous, d.Status)
	if d.Epoch != 0 {
		s += fmt.Sprintf("  epoch %d", d.Epoch)
	}
	if d.Holder != "" {
		s += "  holder " + printable.String(d.Holder)
	}
	if ev.Reason != "" {
		s += "  (" + printable.String(ev.Reason) + ")"
	}
	return s
}
