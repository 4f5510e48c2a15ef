//go:build !race

package lockcmd_test

// raceDetector is whether the tests run under the race detector, which
// makes every RPC several times slower.
const raceDetector = false
