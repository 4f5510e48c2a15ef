package benchcmd

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The capi benchmark runs the test binary again as its Go side.
	if code, ok := SDKLoop(os.Args[1:], os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	if code, ok := RunBFS(context.Background(), os.Args[1:], os.Stdout, os.Stderr); ok {
		// This test binary was started as a daemon of ha's failover group.
		os.Exit(code)
	}
	if dir := os.Getenv(scaleServerEnv); dir != "" {
		// This test binary was started as scale's nameserver process.
		os.Exit(serveScaleNameServer(dir, os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m,
		// glog starts its flush daemon at package init; it is not ours to stop.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	)
}
