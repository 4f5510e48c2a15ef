//go:build !linux

package benchcmd

import "time"

// machineBusy is not measured here.
func machineBusy() (time.Duration, bool) { return 0, false }
