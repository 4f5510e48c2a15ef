package bfscmd_test

import (
	"context"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestAdminReportTotalsDoNotOverflow: chunkservers (real chunkserver
// certificates) that claim volumes of 2^62 bytes, all free, do not make
// bfs admin report's totals wrap around to a negative number: the
// nameserver believes no volume beyond 1 PiB, and the report adds with
// saturation.
func TestAdminReportTotalsDoNotOverflow(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, name := range []string{"liar-a", "liar-b"} {
		require.NoError(t, cl.Authority().CreateNodeFiles(cl.CertsDir(), name+".crt", name+".key", certs.RoleChunkserver, name, []string{"127.0.0.1"}, certs.Options{}))
		creds, err := certs.LoadNodeFiles(cl.CertsDir(), name+".crt", name+".key")
		require.NoError(t, err)
		var vols []*bfspb.VolumeInfo
		for v := range 8 {
			vols = append(vols, &bfspb.VolumeInfo{Index: uint32(v), State: bfspb.VolumeState_VOLUME_STATE_HEALTHY,
				CapacityBytes: 1 << 62, FreeBytes: 1 << 62})
		}
		resp, err := bfspb.NewNameServerClient(cl.DialCreds(cl.NameServerAddr, creds)).Register(ctx, &bfspb.RegisterRequest{
			Address: "127.0.0.1:" + string(rune('1'+i)), CapacityBytes: math.MaxInt64, FreeBytes: math.MaxInt64, Volumes: vols})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
	}
	r := bfs(t, cl, "admin", "report")
	require.Equal(t, 0, r.code, r.stderr)
	line := regexp.MustCompile(`(?m)^Capacity: .*$`).FindString(r.stdout)
	require.NotEmpty(t, line, r.stdout)
	require.NotRegexp(t, `-\d`, line, "a total went negative")
	require.Contains(t, r.stdout, "8388608.0 GiB", "a liar's capacity is believed up to 1 PiB a volume (8 PiB for 8)")
}
