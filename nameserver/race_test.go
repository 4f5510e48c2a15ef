//go:build race

package nameserver

// raceBuild says the tests run under the race detector: the
// million-block tests are then skipped (some 20 s there, 1.5 s without).
const raceBuild = true
