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
//
// The nameserver group (group_test.go, ha_*_test.go): a group is three
// `bfs nameserver` processes, each member's Raft port behind a
// cluster/faultnet proxy (the member advertises the proxy, so a test can
// cut or black-hole the Raft link between two members while clients and
// chunkservers still reach both), chunkservers given the three client
// addresses, optionally each behind a holdProxy (holdproxy_test.go:
// connections stalled and released, what a cut-off sender sent last
// delivered late). Any member can be killed and restarted, a fourth
// started with --join; the leader is found with ClusterStatus, and bfs
// cluster status -o json is read. $BFS_HA_TRIALS caps the trial counts
// of these tests (CI runs fewer than the full counts).
package e2e
