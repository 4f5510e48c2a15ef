// Package session implements the nameserver's client sessions (leases): a
// client opens one session, keeps it alive at about a third of its TTL, and
// everything it holds (files open for write, directory locks) is attached to
// it. When the session ends, by close or by expiry, the nameserver releases
// all of it.
//
// The package has two layers. Table is a pure state machine: sessions by id
// plus a min-heap by deadline, no clock, no I/O, no goroutines; every method
// that needs the time takes now. Manager is the owner around it: it checks
// requests, persists through a Store, and runs the expiry goroutine.
//
// # Invariants
//
//   - Only this process decides expiry, from its own monotonic clock.
//     Deadlines are never persisted and never sent: the wire and the Store
//     carry TTLs (durations).
//   - A session is live while now < deadline; deadline is the time of the
//     last Grant or Renew plus TTL. Once the deadline has passed the session
//     is expired to every caller (KeepAlive, Valid, Get, List), even before
//     the expiry goroutine has removed it: a late keep-alive cannot bring it
//     back.
//   - Expiry costs O(log n) per expired session and nothing per live one: the
//     loop sleeps on one timer set to the heap's earliest deadline. Nothing
//     but List visits every session.
//   - Open makes a session durable in the Store before it is granted or its
//     id is returned, so a session a client knows of survives a restart.
//   - After a restart (NewManager with the sessions the Store held) every
//     recovered session gets a full TTL from the new process's clock,
//     however close to its deadline it was: the holder gets a fair chance to
//     reach the new process.
//   - Each session ends at most once per process: it leaves the table under
//     the mutex, then OnEnd is called, then its record is deleted.
//   - Ending must be safe to repeat. If the process dies between OnEnd and
//     the delete, or the delete fails (it is only logged), the record comes
//     back at the next start, gets a full TTL, and ends again. Whatever OnEnd
//     does (sealing files, cleaning directory locks) must therefore be
//     idempotent. Beware that such a returning session is live again for one
//     TTL: a holder that is still running can keep it alive, although OnEnd
//     has already released what it held. Code attaching resources to a
//     session must not assume that a live session still holds what it held
//     before a restart.
//
// # Concurrency
//
// Table is not safe for concurrent use. Manager is: one mutex guards its
// table and is never held across a Store call or OnEnd. Manager starts one
// goroutine, the expiry loop, which Close stops and waits for (stopc/donec,
// as in etcd's lessor). OnEnd for expired sessions runs on that goroutine,
// one session at a time, in deadline order; a slow OnEnd delays later
// expiries (never the keep-alives, which only take the mutex), and an OnEnd
// that never returns makes Close wait forever. OnEnd for a closed session
// runs on the goroutine that called CloseSession.
package session
