// Package tablet is a minimal Tera-style tablet server for the end-to-end
// tests. Run locks a tablet directory and, nested, its locality-group
// subdirectories, creates a file in each (the tablet's log and one
// sst per locality group) and writes them through the SDK with a Sync
// after every append. It reports every step as one JSON line (an Event):
// each lock and its epoch, each append and the offset synced, and each
// operation it attempted and whether the file system accepted it. The
// tests run it as a process (cluster/e2e/tabletserver) so that they can
// freeze it (SIGSTOP), resume it or kill -9 it, as a tablet server that
// is partitioned, slow or dead.
//
// In Serve mode it appends until one of its locks is lost, then behaves
// like a partitioned tablet server that has not understood yet: for
// Config.StaleRounds rounds it tries again everything it could do in the
// tablet (append to its files, send packets straight to the chunkservers
// of its blocks, create, mkdir, rename, delete, lock), then reports
// KindFinished and returns. Rounds mode appends the same way, then waits
// for commands on Config.Commands, one round of the same stale operations
// per command, so that a test can run a round while the directory is
// unlocked, another once a new holder has it, another after the run's
// session was lost. In Hold mode it writes Config.Initial bytes to
// each file and then holds its locks and open files until ctx ends.
//
// The bytes at offset off of a file are Pattern(path, off, n), so a
// reader can tell every byte's origin.
//
// Run is single-goroutine apart from the SDK's own goroutines; events are
// written in the order they happen.
package tablet
