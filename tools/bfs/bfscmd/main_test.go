package bfscmd_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// As the daemon commands do: set before any test runs a daemon
	// in-process, whose goroutines read it as they log.
	_ = flag.Set("logtostderr", "true")
	goleak.VerifyTestMain(m,
		// glog starts its flush daemon at package init.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		// os/signal's receive loop runs for good once anything calls Notify.
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
	)
}
