// Package statuspage is the nameserver's read-only status page (the role
// of the HDFS NameNode web UI) and the JSON API behind it, served on the
// nameserver's HTTP port beside /metrics:
//
//	/               summary: cluster id, leader and term (or "single
//	                nameserver"), safe mode, chunkservers, capacity, block
//	                health, repair queue and copy rate, locks, sessions;
//	                charts; the first rows of every table below
//	/locks          locks by path, filtered by prefix, state and holder,
//	                with each cleaning's files still pending
//	/lock?path=     one directory: its lock, the files its cleaning waits
//	                for, its stored past locks
//	/sessions       live sessions (ids shown as a prefix only)
//	/chunkservers   chunkservers (and their volumes, when reported)
//	/history        the recent lock transitions, newest first
//	/api/...        the same as JSON: status, locks, lock, sessions,
//	                chunkservers, history, samples (BUILD.md documents them)
//
// The page is server-rendered HTML (html/template) with one small
// embedded script: a cleaning's row follows its lock through /api/lock
// every second, and the summary fetches itself again every 5 s. There is
// no JavaScript build step. Charts are inline SVG drawn on the server.
//
// What it reads. The page sees the nameserver only through the small
// interfaces of page.go, which the nameserver's own RPC handlers satisfy
// (ListDirLocks, GetDirLock, GetLockHistory, ListSessions,
// ListChunkservers, GetSafeMode): every table is paged, filtered and
// bounded exactly as lockctl's listings are, and the JSON agrees with
// what the SDK sees. The summary's figures and the charts' samples are
// read from the nameserver's Prometheus registry, the same values a
// scrape returns (MetricNames lists them; a test holds the nameserver to
// exporting each). Who leads the nameserver group comes from a Leadership
// provider; without one the page says "single nameserver". A
// Chunkserver's Volumes are nested under it in the table once the
// nameserver reports them.
//
// Paging: a table shows one page (?limit=, default 100, at most 1,000)
// and links the next with the nameserver's opaque page token (?page=), so
// the page costs what it shows, also at 100,000 locks (BenchmarkAtScale).
//
// Samples and history are the process's own, in memory, bounded: a ring
// of Config.Samples samples of the charted counters, taken every
// Config.SampleInterval (by default 120 every 5 s: ten minutes), and a
// ring of the last Config.History lock transitions, fed by LockEvents (a
// subscriber that falls behind records a gap and subscribes again).
//
// Access (SPEC §10): over TLS, which a secure nameserver serves its HTTP
// port with, the page and its JSON answer admins only (a verified admin
// certificate; others get 403). An insecure nameserver has no identities
// to tell apart: then the page answers clients on loopback addresses
// only, unless Config.Public (the nameserver's --status-public) says
// otherwise. /metrics is not the page's: any client the port admits may
// scrape it.
//
// Concurrency: one goroutine per Page, started by New and stopped by
// Close, takes the samples and records the transitions; the rings are
// guarded by their own mutexes, and requests only read them. Requests
// hold no lock while they call the nameserver.
package statuspage
