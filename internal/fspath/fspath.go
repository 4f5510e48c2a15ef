// Package fspath normalizes file system paths at the edge of the nameserver.
//
// A normalized path is absolute, uses "/" as separator, has no empty, "." or
// ".." components and no trailing slash (except the root "/" itself). Every
// path a client sends goes through Clean once; everything inside the
// nameserver works on normalized paths only.
package fspath

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLen is the longest path accepted, in bytes.
const MaxLen = 4096

// MaxNameLen is the longest single component accepted, in bytes.
const MaxNameLen = 255

// Root is the normalized root path.
const Root = "/"

// ErrInvalid is wrapped by every error Clean returns.
var ErrInvalid = errors.New("invalid path")

// Clean returns the normalized form of p, or an error wrapping ErrInvalid
// that says what is wrong with it. Repeated slashes and "." components are
// folded; ".." is refused rather than resolved, so a path never names
// something other than what its components spell.
func Clean(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty path", ErrInvalid)
	case len(p) > MaxLen:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxLen)
	case p[0] != '/':
		return "", fmt.Errorf("%w: %q is not absolute", ErrInvalid, p)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: contains a NUL byte", ErrInvalid)
	}
	var b strings.Builder
	b.Grow(len(p))
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("%w: %q contains \"..\"", ErrInvalid, p)
		}
		if len(c) > MaxNameLen {
			return "", fmt.Errorf("%w: component longer than %d bytes", ErrInvalid, MaxNameLen)
		}
		b.WriteByte('/')
		b.WriteString(c)
	}
	if b.Len() == 0 {
		return Root, nil
	}
	return b.String(), nil
}

// Split returns the components of a normalized path; the root has none.
func Split(p string) []string {
	if p == Root {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// Join builds a normalized path from components.
func Join(components []string) string {
	if len(components) == 0 {
		return Root
	}
	return "/" + strings.Join(components, "/")
}

// Dir returns the parent of a normalized path; the parent of the root is
// the root.
func Dir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return Root
	}
	return p[:i]
}

// Base returns the last component of a normalized path ("" for the root).
func Base(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// Within reports whether normalized path p is base or lies under it.
func Within(p, base string) bool {
	if base == Root || p == base {
		return true
	}
	return strings.HasPrefix(p, base) && len(p) > len(base) && p[len(base)] == '/'
}
