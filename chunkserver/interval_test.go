package chunkserver

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestAdoptKeepsIntervalsNoTimerCanFollow: the intervals a registration
// answer names replace the chunkserver's own only when a timer can follow
// them; a value beyond a time.Duration used to wrap (18446744075710 ms
// became about two seconds, 9223372036855 ms a negative interval that
// made every heartbeat fire at once).
func TestAdoptKeepsIntervalsNoTimerCanFollow(t *testing.T) {
	for _, tc := range []struct {
		hbMs, reportMs  int64
		wantHB, wantRep time.Duration
	}{
		{0, 0, time.Second, 10 * time.Second},
		{250, 5000, 250 * time.Millisecond, 5 * time.Second},
		{18446744075710, 9223372036855, time.Second, 10 * time.Second},
		{-5, -1 << 63, time.Second, 10 * time.Second},
	} {
		m := &membership{hb: time.Second, reports: 10 * time.Second, registered: make(chan struct{}), vols: openVolumes(t, t.TempDir())}
		m.adopt(&bfspb.RegisterResponse{ChunkserverId: 1, HeartbeatIntervalMs: tc.hbMs, ReportIntervalMs: tc.reportMs})
		if m.hb != tc.wantHB || m.reports != tc.wantRep {
			t.Errorf("answer (%d ms, %d ms): heartbeat %v, report %v; want %v, %v",
				tc.hbMs, tc.reportMs, m.hb, m.reports, tc.wantHB, tc.wantRep)
		}
	}
}

// TestAdoptPolicy: the volumes keep free what the registration answer
// asks, unless it is something no volume can follow.
func TestAdoptPolicy(t *testing.T) {
	vols := openVolumes(t, t.TempDir())
	m := &membership{hb: time.Second, reports: time.Second, registered: make(chan struct{}), vols: vols}
	space := func() volume.State {
		st := vols.Status()[0]
		return st.State
	}
	m.adopt(&bfspb.RegisterResponse{MinFreeBytes: 1 << 62, MaxVolumeFill: 0.9})
	require.Equal(t, volume.Full, space(), "no disk has 4 EiB free")
	for _, bad := range []*bfspb.RegisterResponse{{MinFreeBytes: -1}, {MaxVolumeFill: 1.5}, {MaxVolumeFill: -0.1}, {MaxVolumeFill: math.NaN()}} {
		m.adopt(bad)
		require.Equal(t, volume.Full, space(), "%v kept the policy", bad)
	}
	m.adopt(&bfspb.RegisterResponse{})
	require.Equal(t, volume.Healthy, space())
}
