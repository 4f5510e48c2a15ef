//go:build !race

package e2e

// raceBuild: the tests run without the race detector, and so do the
// binaries they start (quicker, for iterating; CI runs with -race).
const raceBuild = false
