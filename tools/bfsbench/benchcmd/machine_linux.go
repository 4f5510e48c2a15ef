package benchcmd

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// userHz is the unit of /proc/stat's times (USER_HZ, 100 on every Linux
// architecture Go runs on).
const userHz = 100

// machineBusy is the CPU time the machine's cores were not free: used by
// every process (user, nice, system, irq, softirq) or taken by the
// hypervisor (steal), from /proc/stat's first line; and whether it could
// be read. (guest and guest_nice are counted in user and nice already.)
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, f := range fields[1:min(len(fields), 9)] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, false
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / userHz, true
}
