package replica

import (
	"bytes"
	"fmt"

	"github.com/golang/glog"
	"github.com/hashicorp/go-hclog"
)

// raftLogger is an hclog logger for Raft that writes through glog: one
// log for the whole process, at glog's levels. Raft's debug and trace
// lines show at -v 2.
func raftLogger(name string) hclog.Logger {
	level := hclog.Info
	if glog.V(2) {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       level,
		Output:      glogWriter{},
		DisableTime: true,
	})
}

// glogWriter takes hclog's formatted lines ("[LEVEL] name: message ...")
// and logs each at the matching glog severity.
type glogWriter struct{}

func (glogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	const depth = 4 // past hclog's frames
	switch {
	case bytes.HasPrefix(line, []byte("[ERROR]")):
		glog.ErrorDepth(depth, string(line))
	case bytes.HasPrefix(line, []byte("[WARN]")):
		glog.WarningDepth(depth, string(line))
	default:
		glog.InfoDepth(depth, string(line))
	}
	return len(p), nil
}

// pebbleLogger sends the log store's Pebble lines to glog: its
// informational lines at -v 2.
type pebbleLogger struct{}

func (pebbleLogger) Infof(format string, args ...any) {
	if glog.V(2) {
		glog.InfoDepth(1, fmt.Sprintf("raft log store: "+format, args...))
	}
}
func (pebbleLogger) Errorf(format string, args ...any) {
	glog.ErrorDepth(1, fmt.Sprintf("raft log store: "+format, args...))
}
func (pebbleLogger) Fatalf(format string, args ...any) {
	glog.FatalDepth(1, fmt.Sprintf("raft log store: "+format, args...))
}
