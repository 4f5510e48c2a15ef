// Package statuscode turns a daemon's domain errors into the protocol's
// StatusCode. Each daemon keeps one Table at its edge, the one place its
// errors become codes (the SDK maps the codes back to its own sentinels);
// the lookup is shared.
package statuscode

import (
	"errors"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Entry maps the errors that match Err (errors.Is) to Code.
type Entry struct {
	Err  error
	Code bfspb.StatusCode
}

// Table maps domain errors to codes. The first entry an error matches
// decides, so an error that wraps two sentinels gets the earlier one's.
type Table []Entry

// Of returns the code for err and the message to send with it: OK and no
// message for nil. An error no entry matches is a failure nobody named:
// it is INTERNAL, and logged here, attributed to the caller.
func (t Table) Of(err error) (bfspb.StatusCode, string) {
	if err == nil {
		return bfspb.StatusCode_OK, ""
	}
	for _, e := range t {
		if errors.Is(err, e.Err) {
			return e.Code, err.Error()
		}
	}
	glog.ErrorDepthf(1, "internal error: %v", err)
	return bfspb.StatusCode_INTERNAL, err.Error()
}
