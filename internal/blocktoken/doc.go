// Package blocktoken signs and checks block tokens: the nameserver's word
// that a peer may read or write one block on the chunkservers, until a
// deadline (SPEC §10). It stands on the ground: it imports only the
// protocol and the clock.
//
// # Format
//
// A token is a bfspb.BlockToken (block id, version, access, deadline, the
// identity it was issued to, and for a write the writer's session and the
// directory lock covering the file), serialized, with an HMAC-SHA256 of
// those bytes under a key the nameserver group shares: a
// bfspb.SignedBlockToken {token bytes, key id, mac}. The MAC covers the
// serialized bytes exactly as sent, so nothing is re-encoded before it is
// checked. It travels in the metadata of a Write or Read call under
// MetadataKey.
//
// # Keys and rotation
//
// Keys (NewKey: 32 random bytes and an id that only grows) are made by
// the nameserver leader and replicated through the group's log, so every
// nameserver of the group signs with the same ones and a new leader keeps
// them. Chunkservers get the keys in the answers to Register and to every
// heartbeat (bfspb.BlockKeys) and accept tokens signed by any key of the
// latest answer: the one the leader signs with and the one before it,
// kept while tokens it signed may be alive.
//
// # Clocks
//
// A deadline is a time on the nameserver leader's wall clock; a chunkserver
// never compares it with its own wall clock, which may be set anywhere.
// Each key answer carries the nameserver's wall clock (now_unix_ms), and a
// Keyring judges deadlines against that reading plus the time elapsed since
// on the chunkserver's own monotonic clock. The error is the one-way delay
// of the answer plus the drift since the last heartbeat (a second by
// default): milliseconds, against token lifetimes of minutes. After a
// leader change the new leader's clock takes over at the next heartbeat;
// clocks of a group's nameservers that disagree by more than a token's
// lifetime make tokens expire early (readers ask for new ones) or late.
//
// A Keyring is safe for concurrent use.
package blocktoken
