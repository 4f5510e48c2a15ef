package dirlock

import (
	"context"
	"sync"
)

// FileCloser closes one file open for write the way cleaning needs: it
// seals the file's last block on every replica and returns once every
// live replica has confirmed (BlockReceived) and the file is closed at its
// agreed length. It reports how many bytes longer replicas were cut.
type FileCloser interface {
	CloseFile(ctx context.Context, entry uint64) (truncated int64, err error)
}

// CloseFilesCtx is the cleaning coordinator's drain step: it closes every
// file in files through fc, all at once (fc bounds its own concurrency),
// and returns when all are closed, with the bytes truncated in total, or
// ctx's error. Each file's own retries and backoff are fc's business.
func CloseFilesCtx(ctx context.Context, fc FileCloser, files []uint64) (int64, error) {
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		truncated int64
		firstErr  error
	)
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := fc.CloseFile(ctx, f)
			mu.Lock()
			defer mu.Unlock()
			truncated += n
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	return truncated, firstErr
}
