package nameserver_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// BenchmarkCreateDeleteGRPC measures durable create+delete pairs over real
// gRPC, one connection per client goroutine.
func BenchmarkCreateDeleteGRPC(b *testing.B) {
	for _, par := range []int{1, 32} {
		b.Run(fmt.Sprintf("clients=%d", par*2), func(b *testing.B) {
			c := testcluster.Start(b)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				conn, err := grpc.NewClient(c.NameServerAddr, c.DialOption())
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				ns := bfspb.NewNameServerClient(conn)
				for pb.Next() {
					p := fmt.Sprintf("/f%d", n.Add(1))
					if r, err := ns.Create(ctx, &bfspb.CreateRequest{Path: p}); err != nil || r.Status != bfspb.StatusCode_OK {
						b.Errorf("create: %v %v", r, err)
						return
					}
					if r, err := ns.DeleteFile(ctx, &bfspb.DeleteFileRequest{Path: p}); err != nil || r.Status != bfspb.StatusCode_OK {
						b.Errorf("delete: %v %v", r, err)
						return
					}
				}
			})
		})
	}
}
