//go:build race

package main

// raceBuild says the tests run under the race detector: the C programs
// then also run against a race-checked build of the library.
const raceBuild = true
