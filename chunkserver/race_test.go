//go:build race

package chunkserver

// raceBuild says the tests run under the race detector: the
// million-block report is then skipped.
const raceBuild = true
