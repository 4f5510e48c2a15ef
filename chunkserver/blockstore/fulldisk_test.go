package blockstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// smallDisk mounts a tmpfs of mib MiB and returns its path; the test is
// skipped where this user cannot mount one.
func smallDisk(t *testing.T, mib int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm", mib)); err != nil {
		t.Skipf("a small disk needs a tmpfs mount, which this user cannot make: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file in dir until the disk is full, and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := len(buf); n > 0; {
		if _, err := f.Write(buf[:n]); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			n /= 2
		}
	}
	return path
}

// TestFullDiskStore: a store whose disk fills keeps what it has and
// serves it; it refuses new bytes with ENOSPC (never for good), takes
// them again once space is freed, and opens on a full disk after a crash.
func TestFullDiskStore(t *testing.T) {
	dir := smallDisk(t, 8)
	s := openStore(t, dir)
	data := randBytes(100_000, 1)
	writeAll(t, s, 1, data, 30_000, sealLast)
	filler := fill(t, dir)
	// Records go on until the meta log needs a page the disk lacks.
	var err error
	for id := BlockID(3); err == nil && id < 100_000; id++ {
		_, _, err = s.Seal(id)
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	got, err := s.Read(1, 0, int64(len(data)))
	require.NoError(t, err)
	require.Equal(t, data, got)

	require.ErrorIs(t, s.Check(), ErrFull)

	// A crash on the full disk (the meta log holds records the meta files
	// do not): it opens, and serves what it had from the logs.
	crashed := smallDisk(t, 8)
	crashCopyTo(t, dir, crashed)
	crashFiller := fill(t, crashed)
	s2, err := Open(crashed)
	require.NoError(t, err)
	defer s2.Close()
	got, err = s2.Read(1, 0, int64(len(data)))
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.NotEmpty(t, logsIn(t, crashed), "no room to retire them")
	require.ErrorIs(t, s2.Create(context.Background(), 300_000), syscall.ENOSPC)
	_, err = s2.Info(300_000)
	require.ErrorIs(t, err, ErrNotFound, "a create that failed leaves nothing")

	// Space freed: the first store takes writes again, and the second
	// retires the logs it could not and writes a new one.
	require.NoError(t, os.Remove(filler))
	require.NoError(t, s.Check())
	writeAll(t, s, 200_000, data, 30_000, sealLast)
	info, err := s.Info(200_000)
	require.NoError(t, err)
	require.True(t, info.Sealed)
	require.NoError(t, os.Remove(crashFiller))
	writeAll(t, s2, 200_000, data, 30_000, sealLast)
	require.NoError(t, s2.Check())
	require.Eventually(t, func() bool { return len(logsIn(t, crashed)) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the logs recovery could not retire are retired once there is room")
	require.NoError(t, s2.Close())
	s3 := openStore(t, crashed)
	for _, id := range []BlockID{1, 200_000} {
		got, err := s3.Read(id, 0, int64(len(data)))
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
}

// logsIn lists the meta logs of the store in dir.
func logsIn(t *testing.T, dir string) []logFile {
	t.Helper()
	logs, err := listLogs(filepath.Join(dir, logDir))
	require.NoError(t, err)
	return logs
}
