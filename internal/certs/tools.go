package certs

import (
	"errors"
	"os"
	"path/filepath"
)

// Where the tools and the daemons look for certificates, and the names of
// the certificates the sandbox makes.
const (
	// EnvDir is the environment variable naming a certificates directory.
	EnvDir = "BFS_CERTS_DIR"
	// SandboxDir is the certificates directory of `bfs sandbox` run with
	// its default data folder, relative to the working directory.
	SandboxDir = "bfs-data/certs"
	// ClientUser is the client certificate the sandbox makes, the one the
	// file commands present by default.
	ClientUser = "bfs"
	// AdminUser is the admin certificate the sandbox makes, the one
	// lockctl and `bfs admin` present by default.
	AdminUser = "admin"
)

// FindDir is the certificates directory a tool or daemon uses: flagValue
// (its --certs-dir) if set, else $BFS_CERTS_DIR, else SandboxDir if it
// holds a CA certificate; "" when there is none.
func FindDir(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	if _, err := os.Stat(filepath.Join(SandboxDir, CAFile)); err == nil {
		return SandboxDir
	}
	return ""
}

// ErrNoDir is the error of ResolveDir when no certificates directory is
// found and plaintext was not asked for.
var ErrNoDir = errors.New("no certificates: give --certs-dir or $" + EnvDir +
	" (the sandbox's are in " + SandboxDir + "), or --insecure for a cluster run without TLS")

// ResolveDir resolves the --certs-dir and --insecure flags of a tool or a
// daemon: the certificates directory to use (FindDir), or "" for
// plaintext when insecure. Both at once, or neither with no directory
// found, is an error.
func ResolveDir(flagValue string, insecure bool) (string, error) {
	if insecure {
		if flagValue != "" {
			return "", errors.New("--insecure and --certs-dir exclude each other")
		}
		return "", nil
	}
	dir := FindDir(flagValue)
	if dir == "" {
		return "", ErrNoDir
	}
	return dir, nil
}
