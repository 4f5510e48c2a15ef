// Package e2e holds end-to-end tests that run the real binaries as
// processes, for what only a real process can show: kill -9, restart on the
// same data, nothing acknowledged lost.
package e2e
