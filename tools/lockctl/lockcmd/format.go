package lockcmd

import (
	"encoding/json"
	"fmt"
	"io"
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
	ID          string   `json:"id"`
	Holder      string   `json:"holder"`
	TTLMs       int64    `json:"ttl_ms"`
	RemainingMs int64    `json:"remaining_ms"`
	OpenFiles   int64    `json:"open_files"`
	Locks       []string `json:"locks"`
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
		OpenFiles: s.OpenFiles, Locks: nonNil(s.Locks),
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

// writeLockTable prints locks as a table.
func writeLockTable(w io.Writer, locks []*sdk.DirLock) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSTATE\tHOLDER\tEPOCH\tSESSION\tSINCE\tPENDING")
	for _, d := range locks {
		pending := "-"
		if d.Status == sdk.Cleaning {
			pending = fmt.Sprintf("%d file(s)", len(d.Pending))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n",
			printable.String(d.Path), d.Status, field(d.Holder), d.Epoch, field(d.SessionID), formatTime(d.Since), pending)
	}
	_ = tw.Flush()
}

func writeHistoryTable(w io.Writer, hist []sdk.LockHistoryEntry) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "HOLDER\tEPOCH\tLOCKED-AT\tUNLOCKED-AT\tDURATION\tREASON\tFILES-SEALED\tBYTES-TRUNCATED")
	for _, h := range hist {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n",
			field(h.Holder), h.Epoch, formatTime(h.LockedAt), formatTime(h.UnlockedAt),
			roundDuration(lockDuration(h)), field(h.Reason), h.FilesSealed, h.BytesTruncated)
	}
	_ = tw.Flush()
}

func writeSessionTable(w io.Writer, sessions []sdk.SessionInfo) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOLDER\tTTL\tREMAINING\tOPEN-FILES\tLOCKS")
	for _, s := range sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n",
			field(s.ID), field(s.Holder), roundDuration(s.TTL), roundDuration(s.Remaining), s.OpenFiles,
			field(strings.Join(s.Locks, ",")))
	}
	_ = tw.Flush()
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
