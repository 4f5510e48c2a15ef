package benchcmd

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(scaleServerEnv); dir != "" {
		// This test binary was started as scale's nameserver process.
		os.Exit(serveScaleNameServer(dir, os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m,
		// glog starts its flush daemon at package init; it is not ours to stop.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	)
}
