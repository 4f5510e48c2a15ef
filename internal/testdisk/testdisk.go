// Package testdisk gives tests real disks that fail the way disks do: an
// ext4 file system on a loop device, mounted (errors=remount-ro) at a
// directory of the test's own, which the test can turn read-only (an
// ext4 error, what a failing disk's first bad write does) or make fail
// its reads with I/O errors (the device cut short under the file system,
// past which every read is EIO, as from a dying disk). It needs root, a
// kernel with loop devices and ext4, and losetup and mkfs.ext4; a test
// on a system without them is skipped, saying why. Everything it sets up
// is torn down by t.Cleanup.
package testdisk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Disk is a mounted loop device.
type Disk struct {
	// Dir is where the file system is mounted.
	Dir string
	// Dev is the loop device, e.g. /dev/loop3.
	Dev string
	img string
	t   testing.TB
}

// New makes a disk of mib MiB, or skips the test if it cannot.
func New(t testing.TB, mib int) *Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a disk of its own needs a loop device and a mount: run as root")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("a disk of its own needs %s: %v", tool, err)
		}
	}
	base := t.TempDir()
	d := &Disk{Dir: filepath.Join(base, "disk"), img: filepath.Join(base, "disk.img"), t: t}
	if err := os.WriteFile(d.img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(d.img, int64(mib)<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", d.img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device for a disk of its own: losetup: %v: %s", err, out)
	}
	d.Dev = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", d.Dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", d.Dev, err, out)
		}
	})
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", d.Dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v: %s", d.Dev, err, out)
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(d.Dev, d.Dir, "ext4", 0, "errors=remount-ro"); err != nil {
		t.Skipf("mount ext4 on %s: %v", d.Dev, err)
	}
	// Registered after the detach, so it runs first.
	t.Cleanup(func() {
		if err := syscall.Unmount(d.Dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", d.Dir, err)
		}
	})
	return d
}

// ReadOnly turns the file system read-only, as ext4 does on an error
// with errors=remount-ro: every write from now on fails with EROFS;
// reads still work.
func (d *Disk) ReadOnly() {
	d.t.Helper()
	ctl := filepath.Join("/sys/fs/ext4", filepath.Base(d.Dev), "trigger_fs_error")
	if err := os.WriteFile(ctl, []byte("testdisk: made read-only\n"), 0); err != nil {
		d.t.Skipf("this kernel cannot trigger an ext4 error (%s): %v", ctl, err)
	}
}

// FailReads cuts the device to its first keepMiB MiB under the mounted
// file system and drops its files from the page cache: from then on
// reading (and writing) anything past that fails with EIO.
func (d *Disk) FailReads(keepMiB int) {
	d.t.Helper()
	if err := os.Truncate(d.img, int64(keepMiB)<<20); err != nil {
		d.t.Fatal(err)
	}
	if out, err := exec.Command("losetup", "--set-capacity", d.Dev).CombinedOutput(); err != nil {
		d.t.Fatalf("losetup --set-capacity %s: %v: %s", d.Dev, err, out)
	}
	// What the cache holds would still read: drop it, file by file. A
	// directory that no longer reads is skipped.
	filepath.WalkDir(d.Dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		if f, err := os.Open(path); err == nil {
			unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			f.Close()
		}
		return nil
	})
}

// Fill writes a file until the file system is full, and returns its
// path: removing it frees the space.
func (d *Disk) Fill() string {
	d.t.Helper()
	path := filepath.Join(d.Dir, "testdisk-filler")
	f, err := os.Create(path)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := len(buf); n > 0; {
		if _, err := f.Write(buf[:n]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				d.t.Fatalf("filling %s: %v", d.Dir, err)
			}
			n /= 2
		}
	}
	return path
}

// String names the disk for logs.
func (d *Disk) String() string { return fmt.Sprintf("%s on %s", d.Dir, d.Dev) }
