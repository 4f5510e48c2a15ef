package replica

import (
	"bytes"

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
