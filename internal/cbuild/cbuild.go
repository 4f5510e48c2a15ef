// Package cbuild builds libbfs, the C library of package libbfs, and C and
// C++ programs against it with the system's compilers (gcc and g++): plain
// programs, the C++ adapter as a plugin (a shared object linked to
// libbfs.so) and programs that load such a plugin with dlopen. The tests
// of libbfs and the capi and tera benchmarks of bfsbench use it; BUILD.md
// and scripts/libbfs.sh say how to do the same by hand.
//
// It runs the go command and the compilers as child processes, in the
// repository's root (found from this file's path at build time, so it
// works in tests and under go run, not in a binary built with -trimpath).
// Nothing is cached here: the go command's build cache makes a rebuild
// of an unchanged library take seconds.
package cbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Mode is how the library is built.
type Mode int

const (
	// Shared is libbfs.so (-buildmode=c-shared). Programs link it
	// dynamically and find it through their rpath.
	Shared Mode = iota
	// RaceArchive is libbfs.a (-buildmode=c-archive) with the race
	// detector. Go's race runtime maps its shadow memory for the address
	// range of a non-PIE executable, so a race-checked library works only
	// linked statically into one (-no-pie); as a shared object loaded at
	// a high address it fails at startup ("ThreadSanitizer failed to
	// allocate").
	RaceArchive
)

func (m Mode) String() string {
	switch m {
	case Shared:
		return "shared"
	case RaceArchive:
		return "race-archive"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Lib is a built library.
type Lib struct {
	Mode Mode
	// Path is the library file: libbfs.so or libbfs.a.
	Path string
}

// ErrNoCompiler is returned when gcc or g++ is not installed.
var ErrNoCompiler = errors.New("cbuild: no C or C++ compiler")

// Root returns the repository's root directory.
func Root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("cbuild: cannot locate the repository (built with -trimpath?)")
	}
	return filepath.Join(filepath.Dir(file), "..", ".."), nil
}

// Source returns the path of a file of the libbfs package directory, such
// as "bfs.h" or "testdata/api_test.c".
func Source(rel string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "libbfs", filepath.FromSlash(rel)), nil
}

// Compilers checks that gcc and g++ are installed.
func Compilers() error {
	for _, cc := range []string{"gcc", "g++"} {
		if _, err := exec.LookPath(cc); err != nil {
			return fmt.Errorf("%w: %s not found (apt-get install gcc g++)", ErrNoCompiler, cc)
		}
	}
	return nil
}

// Build builds the library in mode into dir.
func Build(ctx context.Context, dir string, mode Mode) (Lib, error) {
	root, err := Root()
	if err != nil {
		return Lib{}, err
	}
	lib := Lib{Mode: mode, Path: filepath.Join(dir, "libbfs.so")}
	args := []string{"build", "-buildmode=c-shared"}
	if mode == RaceArchive {
		lib.Path = filepath.Join(dir, "libbfs.a")
		args = []string{"build", "-buildmode=c-archive", "-race"}
	}
	args = append(args, "-o", lib.Path, "./libbfs")
	if err := run(ctx, root, "go", args...); err != nil {
		return Lib{}, err
	}
	return lib, nil
}

// Kind is what Compile makes of a Program.
type Kind int

const (
	// Executable is a program linked to the library.
	Executable Kind = iota
	// Plugin is a shared object linked to the library (which must be
	// Shared), for programs that load it with dlopen: the C++ adapter as
	// libbfs_dfs.so.
	Plugin
	// Loader is a program that links nothing of the library: it loads a
	// Plugin with dlopen, as the table store does.
	Loader
)

// Program is a C or C++ program (or shared object) to compile against a
// library.
type Program struct {
	// Out is the file to write.
	Out string
	// Sources are the .c or .cc files, relative to the libbfs directory
	// ("testdata/api_test.c", "cpp/bfs_dfs.cc"). Any .cc makes it C++.
	Sources []string
	// Flags go to the compiler before the sources ("-O2",
	// "-fsanitize=address").
	Flags []string
	Kind  Kind
}

// Compile compiles p against lib. The include path has libbfs (bfs.h),
// libbfs/cpp and libbfs/testdata.
func Compile(ctx context.Context, lib Lib, p Program) error {
	dir, err := Source("")
	if err != nil {
		return err
	}
	if p.Kind == Plugin && lib.Mode != Shared {
		return fmt.Errorf("cbuild: a plugin needs the shared library, not %v", lib.Mode)
	}
	cc, std := "gcc", "-std=c11"
	var srcs []string
	for _, s := range p.Sources {
		if filepath.Ext(s) == ".cc" {
			cc, std = "g++", "-std=c++11"
		}
		srcs = append(srcs, filepath.Join(dir, filepath.FromSlash(s)))
	}
	args := []string{std, "-Wall", "-Wextra", "-Werror", "-g",
		"-I" + dir, "-I" + filepath.Join(dir, "cpp"), "-I" + filepath.Join(dir, "testdata")}
	if p.Kind == Plugin {
		args = append(args, "-shared", "-fPIC")
	}
	args = append(args, p.Flags...)
	args = append(args, srcs...)
	args = append(args, "-o", p.Out)
	if p.Kind == Loader {
		args = append(args, "-ldl", "-pthread")
	} else {
		args = append(args, linkArgs(lib)...)
	}
	return run(ctx, dir, cc, args...)
}

// linkArgs links lib: the shared library by its directory, with an rpath
// so the program finds it where it was built; an archive whole, into a
// non-PIE executable (which the race runtime needs; see RaceArchive),
// with the libraries Go's runtime uses.
func linkArgs(lib Lib) []string {
	if lib.Mode == Shared {
		dir := filepath.Dir(lib.Path)
		return []string{"-L" + dir, "-lbfs", "-Wl,-rpath," + dir, "-pthread"}
	}
	return []string{"-no-pie", lib.Path, "-pthread", "-ldl", "-lm"}
}

// run runs name with args in dir; a failure carries its output.
func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cbuild: %s %v: %w\n%s", name, args, err, out.Bytes())
	}
	return nil
}
