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
//   - After a restart or a leader change (NewManager with the sessions the
//     Store held) every recovered session gets a full TTL from the new
//     Manager's clock, however close to its deadline it was: the holder
//     gets a fair chance to reach the new leader. Only the Manager of the
//     leader in office tracks time.
//   - Each session ends at most once per Manager, and its end commits
//     before it acts: it leaves the table under the mutex, its end is
//     committed in the Store (DeleteSession: the nameserver's CloseSession
//     command, after which nothing of the session applies), and only then
//     is OnEnd called. A Manager whose end cannot commit (a deposed leader
//     whose clock ran out) releases nothing: the session may live on with
//     the new leader.
//   - Config.MaxPerOwner and MaxTotal bound the sessions held (expired
//     ones not yet removed count, and so do Opens waiting for the
//     Store): Open refuses one more with a *LimitError (ErrLimit). The
//     Table counts sessions by owner as it grants and removes them, so
//     the check is a lookup; a new Manager counts the sessions it
//     recovers, which may be more than the bound.
//   - Ending must be safe to repeat. If the process dies between the
//     commit and the end of OnEnd, the next Manager finds what the session
//     held without a session (the nameserver's start of a term releases
//     it); OnEnd also runs when the Store had the end committed already.
//     Whatever OnEnd does (sealing files, cleaning directory locks) must
//     therefore be idempotent.
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
