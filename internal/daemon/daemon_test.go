package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestRPCMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRPCMetrics(reg, "x", "Watch")
	unary := func(method string, resp any, err error) {
		_, _ = m.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/bfs.NameServer/" + method},
			func(context.Context, any) (any, error) { return resp, err })
	}
	for range 3 {
		unary("Stat", &bfspb.StatResponse{}, nil)
	}
	unary("Stat", &bfspb.StatResponse{Status: bfspb.StatusCode_NOT_FOUND}, nil)
	unary("Create", &bfspb.CreateResponse{Status: bfspb.StatusCode_LOCKED}, nil)
	unary("Create", nil, errors.New("gone"))
	stream := func(method string) {
		_ = m.Stream(nil, nil, &grpc.StreamServerInfo{FullMethod: "/bfs.NameServer/" + method},
			func(any, grpc.ServerStream) error { return nil })
	}
	stream("Watch")
	stream("Report")

	got := map[string]float64{}
	timed := map[string]uint64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "x_rpcs_total":
				got[labels["method"]+" "+labels["status"]] = mt.GetCounter().GetValue()
			case "x_rpc_duration_seconds":
				timed[labels["method"]] = mt.GetHistogram().GetSampleCount()
			}
		}
	}
	require.Equal(t, map[string]float64{
		"Stat OK": 3, "Stat NOT_FOUND": 1, "Create LOCKED": 1, "Create transport_error": 1,
	}, got)
	// Every method is timed but the untimed stream.
	require.Equal(t, map[string]uint64{"Stat": 4, "Create": 2, "Report": 1}, timed)
}
