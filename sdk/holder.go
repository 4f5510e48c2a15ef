package sdk

import (
	"context"
	"net"
	"os"
	"strconv"
	"time"
)

// start is when this process loaded the SDK, the "timestamp" part of the
// default holder id. It is set once and never written again.
var start = time.Now()

// defaultHolder returns "ip:port:timestamp" for this process, the holder id
// Baidu BFS's directory-lock design records: ip is the local address this
// host uses to reach the nameserver at addr, port is the process id (an SDK
// client has no listening port; the pid tells processes on one host apart)
// and timestamp is the process start in Unix seconds, so a restarted
// process never looks like its predecessor.
func defaultHolder(ctx context.Context, addr string) string {
	return net.JoinHostPort(localIP(ctx, addr), strconv.Itoa(os.Getpid())) +
		":" + strconv.FormatInt(start.Unix(), 10)
}

// localIP returns the local address of a UDP socket connected to addr. A UDP
// connect sends no packet; it only asks the kernel for the route. When that
// fails (addr is not host:port, no route) it falls back to the host name.
func localIP(ctx context.Context, addr string) string {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", addr)
	if err == nil {
		defer conn.Close()
		if a, ok := conn.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsUnspecified() {
			return a.IP.String()
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}
