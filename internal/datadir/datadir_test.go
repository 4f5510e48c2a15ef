package datadir

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestLockIsExclusiveUntilClosed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	f, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LockFile)); err != nil {
		t.Fatalf("no lock file: %v", err)
	}
	_, err = Lock(dir)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Lock = %v, want ErrInUse", err)
	}
	for _, want := range []string{"data directory " + dir + " is in use", "another process holds it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	g.Close()
}

// TestLockHeldByAnotherProcess: the lock holds against another process,
// the case an operator meets, and goes away with that process.
func TestLockHeldByAnotherProcess(t *testing.T) {
	if os.Getenv("DATADIR_HOLD") != "" {
		if _, err := Lock(os.Getenv("DATADIR_HOLD")); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		os.Stdin.Read(make([]byte, 1)) // until the parent closes stdin
		os.Exit(0)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHeldByAnotherProcess$")
	cmd.Env = append(os.Environ(), "DATADIR_HOLD="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child did not take the lock: %q, %v", buf, err)
	}
	_, err = Lock(dir)
	if !errors.Is(err, ErrInUse) {
		t.Errorf("Lock while another process holds it = %v, want ErrInUse", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	f, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after the other process ended: %v", err)
	}
	f.Close()
}
