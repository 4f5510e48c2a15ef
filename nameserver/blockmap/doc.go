// Package blockmap is the nameserver's picture of the chunkservers: which
// are registered and alive, and which replicas each holds.
//
// Nothing here is persisted. After a nameserver restart the map starts
// empty and is rebuilt from registrations and block reports; until a
// chunkserver has had the dead timeout to come back, it is not declared
// dead (Map.Dead answers false for an unknown address that young).
//
// A Map does no I/O and starts no goroutines; time is passed in. It is
// safe for concurrent use (one mutex, never held across anything but map
// updates).
package blockmap
