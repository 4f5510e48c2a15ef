package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/sdk"
)

// The Go side of the capi and tera benchmarks runs in a process of its
// own, like the C and C++ sides (libbfs/bench/bench.c, dfs_bench.cc), so
// that neither shares a runtime, heap and garbage collector with the
// in-process cluster: bfsbench runs itself again with sdkLoopEnv set, and
// SDKLoop, called first thing by main (and by the tests' TestMain), takes
// over. Its arguments, what it does and what it prints are those of the
// other side's program exactly.

// sdkLoopEnv, set in the environment, makes the process the Go side of
// the capi or tera benchmark.
const sdkLoopEnv = "BFSBENCH_CAPI_SDK_LOOP"

// SDKLoop runs the Go side of the capi or tera benchmark if the process
// was started as one, and returns its exit code and true; otherwise it
// returns false at once.
func SDKLoop(args []string, stdout, stderr io.Writer) (int, bool) {
	if os.Getenv(sdkLoopEnv) == "" {
		return 0, false
	}
	if err := sdkLoop(context.Background(), args, stdout); err != nil {
		fmt.Fprintf(stderr, "bfsbench sdk loop: %v\n", err)
		return 1, true
	}
	return 0, true
}

const sdkLoopUsage = "lock NAMESERVER DIR DURATION_MS | write NAMESERVER PATH BYTES [CHUNK] | read NAMESERVER PATH BYTES CHUNK"

func sdkLoop(ctx context.Context, args []string, stdout io.Writer) error {
	ok := len(args) == 4 && (args[0] == "lock" || args[0] == "write") ||
		len(args) == 5 && (args[0] == "write" || args[0] == "read")
	if !ok {
		return fmt.Errorf("usage: %s; got %q", sdkLoopUsage, args)
	}
	var nums []int64
	for _, a := range args[3:] {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return err
		}
		nums = append(nums, n)
	}
	chunk := int64(ioChunk) // bench.c's writes
	if len(nums) == 2 {
		chunk = nums[1]
	}
	if chunk <= 0 {
		return fmt.Errorf("chunk %d: must be positive", chunk)
	}
	opts := []sdk.Option{sdk.WithHolder("bfsbench-go")}
	if os.Getenv(sideInsecureEnv) == "" {
		opts = append(opts, sdk.WithCertsDir(os.Getenv(certs.EnvDir), certs.ClientUser))
	}
	client, err := sdk.Dial(ctx, args[1], opts...)
	if err != nil {
		return err
	}
	defer client.Close()
	switch args[0] {
	case "lock":
		return sdkLockCycles(ctx, client, args[2], time.Duration(nums[0])*time.Millisecond, stdout)
	case "write":
		return sdkWrite(ctx, client, args[2], nums[0], chunk, stdout)
	}
	return sdkRead(ctx, client, args[2], nums[0], chunk, stdout)
}

// sdkLockCycles is bench.c's lock_cycles.
func sdkLockCycles(ctx context.Context, client *sdk.Client, dir string, d time.Duration, stdout io.Writer) error {
	if err := client.MkdirAll(ctx, dir, 0); err != nil {
		return err
	}
	cycle := func() error {
		l, err := client.LockDir(ctx, dir)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	}
	if err := cycle(); err != nil { // warm-up: the session's lock watch starts
		return err
	}
	lat := make([]time.Duration, 0, 1<<16)
	start := time.Now()
	end, t := start.Add(d), start
	for t.Before(end) {
		if err := cycle(); err != nil {
			return err
		}
		t2 := time.Now()
		lat = append(lat, t2.Sub(t))
		t = t2
	}
	fmt.Fprintf(stdout, "cycles %d elapsed_ns %d\n", len(lat), t.Sub(start).Nanoseconds())
	for _, l := range lat {
		fmt.Fprintln(stdout, l.Nanoseconds())
	}
	return nil
}

// chunkPattern is the chunk every write side writes: byte i is i*7+3.
func chunkPattern(n int64) []byte {
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	return buf
}

// sdkWrite is bench.c's write_file and dfs_bench.cc's write.
func sdkWrite(ctx context.Context, client *sdk.Client, path string, size, chunk int64, stdout io.Writer) error {
	// The other side opens the session (and the connection) before its
	// clock starts: so here.
	if _, err := client.Session(ctx); err != nil {
		return err
	}
	buf := chunkPattern(chunk)
	start := time.Now()
	w, err := client.Create(ctx, path, sdk.Overwrite())
	if err != nil {
		return err
	}
	for off := int64(0); off < size; off += chunk {
		if _, err := w.Write(buf[:min(chunk, size-off)]); err != nil {
			w.Close()
			return err
		}
	}
	if err := w.CloseContext(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bytes %d elapsed_ns %d\n", size, time.Since(start).Nanoseconds())
	return nil
}

// sdkRead is dfs_bench.cc's read: reads of chunk bytes (each filled, as
// libbfs's bfs_read fills it, short only at the end), the first and last
// byte of each checked.
func sdkRead(ctx context.Context, client *sdk.Client, path string, size, chunk int64, stdout io.Writer) error {
	if _, err := client.Session(ctx); err != nil {
		return err
	}
	buf := make([]byte, chunk)
	start := time.Now()
	r, err := client.Open(ctx, path)
	if err != nil {
		return err
	}
	defer r.Close()
	var done int64
	for {
		n, err := io.ReadFull(r, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return err
		}
		if n == 0 {
			break
		}
		if buf[0] != 3 || buf[n-1] != byte((n-1)*7+3) {
			return fmt.Errorf("%s: wrong bytes at %d", path, done)
		}
		buf[0] = 0
		done += int64(n)
	}
	if done != size {
		return fmt.Errorf("%s: read %d bytes, want %d", path, done, size)
	}
	if err := r.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bytes %d elapsed_ns %d\n", size, time.Since(start).Nanoseconds())
	return nil
}
