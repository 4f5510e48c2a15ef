package chunkserver

import (
	"context"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestConfig(t *testing.T) {
	cfg := DefaultConfig()
	require.ErrorContains(t, cfg.validate(), "no TLS certificates")
	cfg.Insecure = true
	require.NoError(t, cfg.validate())
	require.Equal(t, "127.0.0.1:8830", cfg.ListenAddr)
	require.NotNil(t, cfg.Clock)
	_, err := New(Config{})
	require.Error(t, err)
	_, err = New(Config{DataDir: t.TempDir(), HeartbeatInterval: -1, Insecure: true})
	require.Error(t, err)
	_, err = New(Config{DataDir: t.TempDir(), VolumeCheckTimeout: -1, Insecure: true})
	require.ErrorContains(t, err, "negative volume check timeout")
	require.Equal(t, volume.DefaultCheckTimeout, DefaultConfig().VolumeCheckTimeout)
}

func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	// Closed without serving.
	srv, err := New(Config{DataDir: dir, NameServerAddr: "127.0.0.1:1", Insecure: true})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.ErrorIs(t, srv.Serve(context.Background(), lis), ErrClosed)
	lis.Close()

	// Serve returns when its context ends, though the nameserver is
	// unreachable (registration keeps retrying until then).
	srv, err = New(Config{DataDir: dir, NameServerAddr: "127.0.0.1:1", Insecure: true})
	require.NoError(t, err)
	lis, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	cancel()
	require.NoError(t, <-served)
	require.NoError(t, srv.Close())
}

func TestMetrics(t *testing.T) {
	cs := standalone(t)
	writeBlock(t, cs.client, 1, []byte("0123456789"), 4, true)
	readAll(t, cs.client, 1, 0, 0)
	_, err := cs.client.Seal(context.Background(), &bfspb.SealRequest{BlockId: 2})
	require.NoError(t, err)
	m := cs.metrics
	require.EqualValues(t, 10, value(t, m.written))
	require.EqualValues(t, 10, value(t, m.read))
	require.EqualValues(t, 2, value(t, m.seals))
	require.EqualValues(t, 3, value(t, m.packets.WithLabelValues("OK")))
	families, err := m.registry.Gather()
	require.NoError(t, err)
	got := make(map[string]int)
	for _, f := range families {
		got[f.GetName()] = len(f.GetMetric())
		if f.GetName() == "bfs_chunkserver_rpcs_total" {
			require.Len(t, f.GetMetric(), 2)
			for i, method := range []string{"CreateBlock", "Seal"} {
				require.Equal(t, method, f.GetMetric()[i].GetLabel()[0].GetValue())
				require.EqualValues(t, 1, f.GetMetric()[i].GetCounter().GetValue(), "one %s answered OK", method)
			}
		}
	}
	require.Equal(t, 1, got["bfs_chunkserver_blocks"])
	require.Equal(t, 3, got["bfs_chunkserver_rpc_duration_seconds"]) // CreateBlock, Seal and Read
}

// value reads a counter.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}
