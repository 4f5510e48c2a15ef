package certs

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// BenchmarkUnary is what TLS adds to a small RPC (the health check), each
// client goroutine on its own connection: plaintext, these credentials,
// and gRPC's own TLS credentials over the same certificates.
func BenchmarkUnary(b *testing.B) {
	p := newPKIB(b)
	node, err := LoadNode(p.dir)
	if err != nil {
		b.Fatal(err)
	}
	client, err := LoadClient(p.dir, "alice")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		server, dialer credentials.TransportCredentials
	}{
		{"plaintext", insecure.NewCredentials(), insecure.NewCredentials()},
		{"tls", TransportCredentials(node), TransportCredentials(client)},
		{"grpc-tls", credentials.NewTLS(node.current().serverConfig()), credentials.NewTLS(client.ClientConfig("127.0.0.1"))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := grpc.NewServer(grpc.Creds(tc.server))
			healthpb.RegisterHealthServer(g, health.NewServer())
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go g.Serve(lis)
			defer g.Stop()
			b.SetParallelism(8)
			before := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(tc.dialer))
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				h := healthpb.NewHealthClient(conn)
				for pb.Next() {
					if _, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			// On a shared machine the CPU an RPC takes says more than the
			// time: the time is what others leave.
			b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
