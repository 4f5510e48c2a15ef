package statuscode_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bfs-go/bfs/internal/statuscode"
	"github.com/bfs-go/bfs/proto/bfspb"
)

var (
	errGone  = errors.New("gone")
	errTaken = errors.New("taken")
)

var table = statuscode.Table{
	{Err: errGone, Code: bfspb.StatusCode_NOT_FOUND},
	{Err: errTaken, Code: bfspb.StatusCode_EXISTS},
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		err      error
		wantCode bfspb.StatusCode
		wantMsg  string
	}{
		{nil, bfspb.StatusCode_OK, ""},
		{errGone, bfspb.StatusCode_NOT_FOUND, "gone"},
		{fmt.Errorf("open /a: %w", errTaken), bfspb.StatusCode_EXISTS, "open /a: taken"},
		// The first entry matched decides.
		{errors.Join(errTaken, errGone), bfspb.StatusCode_NOT_FOUND, "taken\ngone"},
		{errors.New("disk on fire"), bfspb.StatusCode_INTERNAL, "disk on fire"},
	} {
		code, msg := table.Of(tc.err)
		if code != tc.wantCode || msg != tc.wantMsg {
			t.Errorf("Of(%v) = %v, %q; want %v, %q", tc.err, code, msg, tc.wantCode, tc.wantMsg)
		}
	}
}
