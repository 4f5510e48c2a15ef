//go:build !linux

package benchcmd

import "os/exec"

// dieWithParent does nothing here: only Linux kills a child with its
// parent, so elsewhere an interrupted run may leave daemons behind.
func dieWithParent(*exec.Cmd) {}
