package dirlock

import (
	"context"
	"sync"
)

// FileCloser closes one file open for write the way cleaning needs: it
// seals the file's last block on every replica and returns once every
// live replica has confirmed (BlockReceived), the file is closed at its
// agreed length, and every live replica holds that length (I5). It
// reports how many bytes longer replicas were cut. Its retries and
// backoff are its own; it returns an error only when ctx ends.
type FileCloser interface {
	CloseFile(ctx context.Context, file uint64) (truncated int64, err error)
}

// CloseFilesCtx is the cleaning's drain step (SPEC §6 steps 2 and 3): it
// closes every file in files through fc, at most limit at once (limit < 1
// means one at a time), and returns when all are closed, with the bytes
// truncated in total, or with ctx's error once ctx ends. The calls still
// running when ctx ends see it end too, and CloseFilesCtx waits for them.
func CloseFilesCtx(ctx context.Context, fc FileCloser, files []uint64, limit int) (int64, error) {
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		truncated int64
		firstErr  error
	)
	slots := make(chan struct{}, max(limit, 1))
	for _, f := range files {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return truncated, ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-slots }()
			n, err := fc.CloseFile(ctx, f)
			mu.Lock()
			defer mu.Unlock()
			truncated += n
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	return truncated, firstErr
}
