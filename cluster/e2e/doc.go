// Package e2e holds end-to-end tests that run the real binaries as
// processes, for what only a real process can show: kill -9, restart on the
// same data, nothing acknowledged lost, a tablet server frozen with
// SIGSTOP while the master fails it over, a chunkserver drained by the
// bfs binary's admin commands while readers keep reading, and disks that
// fail under a chunkserver of two volumes (volume_test.go: turned
// read-only, failing reads, filled through a kill -9; on
// internal/testdisk loop devices and tmpfs mounts, skipped without root).
//
// TestMain builds, with -race when the tests run with it, the bfs binary
// (nameserver, chunkserver) and cluster/e2e/tabletserver, a minimal tablet server that reports
// every step as a JSON line (package cluster/e2e/tablet). A data race
// any of these processes reports fails the test that started it.
//
// The helpers: startProcess and startDaemon run a program and kill it at
// the end of the test; a process can be killed (SIGKILL), stopped (SIGSTOP,
// returning once every thread is stopped) and continued; a cluster is a
// nameserver and chunkservers as processes that can be killed and
// restarted on their data and address; a tabletProc collects a tablet
// server's events. Every wait has a deadline.
package e2e
