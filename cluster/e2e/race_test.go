//go:build race

package e2e

// raceBuild: the tests run under the race detector, and so do the
// binaries they start.
const raceBuild = true
