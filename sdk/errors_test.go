package sdk

import (
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestStatusErrorCoversEveryCode(t *testing.T) {
	seen := map[error]bfspb.StatusCode{}
	for v, name := range bfspb.StatusCode_name {
		code := bfspb.StatusCode(v)
		err := statusError(code, "", nil)
		if code == bfspb.StatusCode_OK {
			assert.NoError(t, err, name)
			continue
		}
		require.Error(t, err, "%s maps to nil", name)
		want, ok := statusErrors[code]
		require.True(t, ok, "%s is not in the table", name)
		assert.ErrorIs(t, err, want, name)
		if prev, dup := seen[want]; dup {
			t.Errorf("%s and %s map to the same sentinel %v", prev, name, want)
		}
		seen[want] = code
	}
	assert.Len(t, statusErrors, len(bfspb.StatusCode_name)-1, "table has codes the enum does not")
}

func TestStatusErrorUnknownCode(t *testing.T) {
	err := statusError(bfspb.StatusCode(4242), "", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "4242")
	for _, s := range statusErrors {
		assert.NotErrorIs(t, err, s)
	}
}

func TestLockedError(t *testing.T) {
	conflict := &bfspb.LockConflict{Path: "/t", Holder: "10.0.0.1:42:1700000000", Epoch: 7}
	err := statusError(bfspb.StatusCode_LOCKED, "", conflict)
	var le *LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, LockedError{Path: "/t", Holder: "10.0.0.1:42:1700000000", Epoch: 7, Status: bfspb.StatusCode_LOCKED}, *le)
	assert.ErrorIs(t, err, ErrLocked)
	assert.NotErrorIs(t, err, ErrCleaning)
	assert.Equal(t, "/t locked by 10.0.0.1:42:1700000000 (epoch 7)", err.Error())

	err = pathError("mkdir", "/t/a", statusError(bfspb.StatusCode_CLEANING, "", conflict))
	assert.ErrorIs(t, err, ErrCleaning)
	assert.NotErrorIs(t, err, ErrLocked)
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "mkdir /t/a: /t being cleaned by 10.0.0.1:42:1700000000 (epoch 7)", err.Error())

	// Without a conflict record the error still matches and reads well.
	err = statusError(bfspb.StatusCode_LOCKED, "", nil)
	assert.ErrorIs(t, err, ErrLocked)
	assert.Equal(t, "directory locked", err.Error())
}

func TestStatusErrorShowsMessage(t *testing.T) {
	err := statusError(bfspb.StatusCode_INVALID_ARGUMENT, "invalid argument: cannot move /a into its own subtree", nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.EqualError(t, err, "invalid argument: cannot move /a into its own subtree")

	// A message that only repeats the sentinel is the sentinel itself.
	assert.Same(t, ErrExists, statusError(bfspb.StatusCode_EXISTS, "file exists", nil))

	err = statusError(bfspb.StatusCode(77), "odd", nil)
	assert.EqualError(t, err, "nameserver answered unknown status code 77: odd")
}

func TestResponseError(t *testing.T) {
	assert.NoError(t, responseError(&bfspb.MkdirResponse{}))
	err := responseError(&bfspb.RenameResponse{
		Status:   bfspb.StatusCode_LOCKED,
		Conflict: &bfspb.LockConflict{Path: "/t", Holder: "h", Epoch: 3},
	})
	var le *LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "h", le.Holder)
	assert.ErrorIs(t, responseError(&bfspb.StatResponse{Status: bfspb.StatusCode_NOT_FOUND}), ErrNotFound)
}

func TestErrorsMatchFS(t *testing.T) {
	assert.ErrorIs(t, pathError("stat", "/x", ErrNotFound), fs.ErrNotExist)
	assert.ErrorIs(t, ErrExists, fs.ErrExist)
	assert.ErrorIs(t, ErrPermissionDenied, fs.ErrPermission)
	assert.ErrorIs(t, ErrInvalidArgument, fs.ErrInvalid)
	assert.NotErrorIs(t, ErrNotEmpty, fs.ErrExist)
	assert.Equal(t, "mkdir /a: file exists", pathError("mkdir", "/a", ErrExists).Error())
}

func TestCleanPath(t *testing.T) {
	for _, bad := range []string{"", "a", "a/b", "/a/../b", "/a\x00b", "/" + strings.Repeat("x", 5000)} {
		_, err := cleanPath(bad)
		assert.ErrorIs(t, err, ErrInvalidArgument, "%q", bad)
	}
	p, err := cleanPath("//a/./b/")
	require.NoError(t, err)
	assert.Equal(t, "/a/b", p)
}

func TestModeWire(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		wire uint32
	}{
		{0, 0},
		{0o755, 0o755},
		{os.ModeSetuid | 0o755, 0o4755},
		{os.ModeSetgid | 0o750, 0o2750},
		{os.ModeSticky | 0o777, 0o1777},
		{os.ModeSetuid | os.ModeSetgid | os.ModeSticky | 0o777, 0o7777},
	} {
		w, err := modeToWire(tc.mode)
		require.NoError(t, err, "%v", tc.mode)
		assert.Equal(t, tc.wire, w, "%v", tc.mode)
		assert.Equal(t, tc.mode, modeFromWire(tc.wire), "%o", tc.wire)
	}
	for _, bad := range []os.FileMode{os.ModeDir | 0o755, os.ModeSymlink, os.ModeAppend | 0o644} {
		_, err := modeToWire(bad)
		assert.ErrorIs(t, err, ErrInvalidArgument, "%v", bad)
	}
}

func TestNextStart(t *testing.T) {
	_, err := nextStart("", nil)
	assert.ErrorIs(t, err, ErrInternal)
	_, err = nextStart("b", []*bfspb.FileInfo{{Name: "a"}})
	assert.ErrorIs(t, err, ErrInternal)
	next, err := nextStart("a", []*bfspb.FileInfo{{Name: "b"}, {Name: "c"}})
	require.NoError(t, err)
	assert.Equal(t, "c", next)
}
