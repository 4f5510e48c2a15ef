package sdk

import (
	"context"
	"fmt"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// SafeMode is the nameserver's safe mode state: while On, it deletes no
// replica. It leaves by itself once Reported of Known blocks reach
// Threshold, or when an operator calls LeaveSafeMode.
type SafeMode struct {
	On              bool
	Known, Reported int64
	Threshold       float64
	LeftByOperator  bool
	// MinChunkservers must have sent a full block report to leave by
	// itself; ReportedChunkservers have.
	MinChunkservers, ReportedChunkservers int64
}

// SafeMode returns the nameserver's safe mode state.
func (c *Client) SafeMode(ctx context.Context) (SafeMode, error) {
	if err := c.checkOpen(); err != nil {
		return SafeMode{}, err
	}
	resp, err := c.ns.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
	if err != nil {
		return SafeMode{}, fmt.Errorf("safemode get: %w", transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return SafeMode{}, fmt.Errorf("safemode get: %w", err)
	}
	return SafeMode{On: resp.On, Known: resp.KnownBlocks, Reported: resp.ReportedBlocks,
		Threshold: resp.Threshold, LeftByOperator: resp.LeftByOperator,
		MinChunkservers: resp.MinChunkservers, ReportedChunkservers: resp.ReportedChunkservers}, nil
}

// LeaveSafeMode ends the nameserver's safe mode at once: replicas the
// namespace knows to be gone are deleted from then on, even if many
// blocks are not reported yet.
func (c *Client) LeaveSafeMode(ctx context.Context) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	resp, err := c.ns.LeaveSafeMode(ctx, &bfspb.LeaveSafeModeRequest{})
	if err != nil {
		return fmt.Errorf("safemode leave: %w", transportError(ctx, err))
	}
	if err := responseError(resp); err != nil {
		return fmt.Errorf("safemode leave: %w", err)
	}
	return nil
}
