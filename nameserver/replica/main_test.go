package replica

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(appenderEnv); dir != "" {
		os.Exit(runAppender(dir))
	}
	goleak.VerifyTestMain(m,
		// glog starts its flush daemon in init; it is not ours to stop.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	)
}
