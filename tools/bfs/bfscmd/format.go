package bfscmd

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

const timeLayout = "2006-01-02 15:04"

// longLine formats fi as "hdfs dfs -ls" does, without owner and group:
// mode, replication ("-" for a directory), size, mtime, path.
func longLine(fi *sdk.FileInfo) string {
	repl := "-"
	if !fi.IsDir {
		repl = strconv.Itoa(fi.Replication)
		if fi.LiveReplicas >= 0 {
			// Live beside target, as hdfs fsck shows it.
			repl = strconv.Itoa(fi.LiveReplicas) + "/" + repl
		}
	}
	s := fmt.Sprintf("%s %3s %12d %s %s", fi.Mode, repl, fi.Size, formatTime(fi.ModTime, timeLayout), printable.String(fi.Path))
	if fi.LockStatus != sdk.Unlocked {
		s += "  (" + lockText(fi) + ")"
	}
	return s
}

func lockText(fi *sdk.FileInfo) string {
	s := fi.LockStatus.String()
	if fi.Holder != "" {
		s += " by " + printable.String(fi.Holder)
	}
	if fi.Epoch != 0 {
		s += fmt.Sprintf(", epoch %d", fi.Epoch)
	}
	return s
}

func formatTime(t time.Time, layout string) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(layout)
}

// writeStat prints every field of fi, one per line.
func writeStat(w io.Writer, fi *sdk.FileInfo) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	kind, repl := "file", strconv.Itoa(fi.Replication)
	if fi.IsDir {
		kind, repl = "directory", "-"
	} else if fi.LiveReplicas >= 0 {
		repl += fmt.Sprintf(" (%d live)", fi.LiveReplicas)
	}
	fmt.Fprintf(tw, "Path:\t%s\n", printable.String(fi.Path))
	fmt.Fprintf(tw, "Type:\t%s\n", kind)
	fmt.Fprintf(tw, "Mode:\t%s (%04o)\n", fi.Mode, unixMode(fi.Mode))
	fmt.Fprintf(tw, "Size:\t%d\n", fi.Size)
	fmt.Fprintf(tw, "Replication:\t%s\n", repl)
	fmt.Fprintf(tw, "Modified:\t%s\n", formatTime(fi.ModTime, time.RFC3339))
	fmt.Fprintf(tw, "Entry ID:\t%d\n", fi.EntryID)
	if fi.IsDir {
		fmt.Fprintf(tw, "Lock:\t%s\n", lockText(fi))
	} else if fi.WriterSession != "" {
		fmt.Fprintf(tw, "Open for write by:\tsession %s\n", printable.String(fi.WriterSession))
	}
	_ = tw.Flush()
}
