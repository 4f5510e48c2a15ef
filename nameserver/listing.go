package nameserver

import (
	"context"
	"encoding/base64"
	"sort"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// The operators' listings (locks, sessions, lock history) are paged, so
// that 100,000 locks or 20,000 sessions never make a message larger than
// a client accepts (SPEC §10: every listing is paged, message sizes are
// bounded).
const (
	defaultPageSize = 1000
	maxPageSize     = 10000
	// maxPageBytes bounds a page's encoded size, well under the 4 MiB a
	// gRPC client accepts by default, however long its items' strings.
	maxPageBytes = 1 << 20
	// lockPageScan bounds the locks one page of ListDirLocks looks at
	// (dirlock.Query.Scan): a selective filter over many locks returns
	// short pages rather than hold the lock table for long.
	lockPageScan = 1 << 14
	// A SessionInfo lists the paths of at most sessionLocksShown of its
	// session's locks, and of at most sessionLocksBytes in all.
	sessionLocksShown = 1000
	sessionLocksBytes = 64 << 10
)

// pageSize is the size of a page asked for as n (0: the default).
func pageSize(n uint32) int {
	if n == 0 {
		return defaultPageSize
	}
	return min(int(n), maxPageSize)
}

// Page tokens are opaque to clients: a letter naming the listing, then
// the key the next page resumes after (a path, a session id, an epoch),
// in base64url.
const (
	tokenLocks    = 'l'
	tokenSessions = 's'
	tokenHistory  = 'h'
)

func pageToken(kind byte, after string) string {
	if after == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(append([]byte{kind}, after...))
}

func parsePageToken(kind byte, token string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < 2 || b[0] != kind {
		return "", namespaceInvalid("bad page token: pass the next_page_token of the same listing")
	}
	return string(b[1:]), nil
}

// pageBudget cuts a page at maxPageBytes; its first item always fits.
type pageBudget struct{ bytes, items int }

func (b *pageBudget) fits(m proto.Message) bool {
	n := proto.Size(m)
	n += 1 + protowire.SizeVarint(uint64(n)) // its field tag and length
	if b.items > 0 && b.bytes+n > maxPageBytes {
		return false
	}
	b.bytes += n
	b.items++
	return true
}

// ListDirLocks lists one page of the locked and cleaning directories
// under a prefix, by path, filtered by state, holder and session.
func (srv *Server) ListDirLocks(ctx context.Context, req *bfspb.ListDirLocksRequest) (*bfspb.ListDirLocksResponse, error) {
	s, notLeader := leading[*bfspb.ListDirLocksResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	err := s.verify()
	var resp *bfspb.ListDirLocksResponse
	if err == nil {
		resp, err = s.listDirLocks(req)
	}
	if err != nil {
		code, msg := statusOf(err)
		return &bfspb.ListDirLocksResponse{Status: code, Message: msg}, nil
	}
	return resp, nil
}

func (s *term) listDirLocks(req *bfspb.ListDirLocksRequest) (*bfspb.ListDirLocksResponse, error) {
	q, err := lockQuery(req)
	if err != nil {
		return nil, err
	}
	resp := &bfspb.ListDirLocksResponse{}
	if req.FilterStatus && req.Status == bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
		return resp, nil // the table holds no unlocked directories
	}
	locks, next := s.ns.Locks().Page(q)
	var budget pageBudget
	for _, l := range locks {
		d := s.dirLock(l)
		if !budget.fits(d) {
			next = resp.Locks[len(resp.Locks)-1].Path
			break
		}
		resp.Locks = append(resp.Locks, d)
	}
	resp.NextPageToken = pageToken(tokenLocks, next)
	return resp, nil
}

func lockQuery(req *bfspb.ListDirLocksRequest) (dirlock.Query, error) {
	prefix := req.Prefix
	if prefix == "" {
		prefix = "/"
	}
	p, err := cleanPath(prefix)
	if err != nil {
		return dirlock.Query{}, err
	}
	after, err := parsePageToken(tokenLocks, req.PageToken)
	if err != nil {
		return dirlock.Query{}, err
	}
	q := dirlock.Query{Prefix: p, After: after, Holder: req.Holder, Session: dirlock.SessionID(req.SessionId),
		Limit: pageSize(req.PageSize), Scan: lockPageScan}
	if req.FilterStatus {
		q.Status = dirlock.Locked
		if req.Status == bfspb.LockStatus_LOCK_STATUS_CLEANING {
			q.Status = dirlock.Cleaning
		}
	}
	return q, nil
}

// ListSessions lists one page of the live sessions, by id.
func (srv *Server) ListSessions(ctx context.Context, req *bfspb.ListSessionsRequest) (*bfspb.ListSessionsResponse, error) {
	s, notLeader := leading[*bfspb.ListSessionsResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	resp, err := s.listSessions(req)
	if err != nil {
		code, msg := statusOf(err)
		return &bfspb.ListSessionsResponse{Status: code, Message: msg}, nil
	}
	return resp, nil
}

func (s *term) listSessions(req *bfspb.ListSessionsRequest) (*bfspb.ListSessionsResponse, error) {
	after, err := parsePageToken(tokenSessions, req.PageToken)
	if err != nil {
		return nil, err
	}
	infos, next := s.sessions.Page(session.ID(after), pageSize(req.PageSize), req.Holder)
	ids := make([]dirlock.SessionID, len(infos))
	for i, in := range infos {
		ids[i] = dirlock.SessionID(in.ID)
	}
	held, counts := s.ns.Locks().HeldBy(ids, sessionLocksShown)
	resp := &bfspb.ListSessionsResponse{}
	var budget pageBudget
	for _, in := range infos {
		info := &bfspb.SessionInfo{
			SessionId:   string(in.ID),
			Holder:      in.Holder,
			TtlMs:       in.TTL.Milliseconds(),
			RemainingMs: in.Remaining.Milliseconds(),
			Locks:       firstBytes(held[dirlock.SessionID(in.ID)], sessionLocksBytes),
			LockCount:   int64(counts[dirlock.SessionID(in.ID)]),
		}
		if open, err := s.ns.OpenFiles(string(in.ID)); err == nil {
			info.OpenFiles = int64(len(open))
		}
		if !budget.fits(info) {
			next = session.ID(resp.Sessions[len(resp.Sessions)-1].SessionId)
			break
		}
		resp.Sessions = append(resp.Sessions, info)
	}
	resp.NextPageToken = pageToken(tokenSessions, string(next))
	return resp, nil
}

// firstBytes is the longest head of paths whose lengths add up to at most
// n bytes.
func firstBytes(paths []string, n int) []string {
	for i, p := range paths {
		if n -= len(p); n < 0 {
			return paths[:i]
		}
	}
	return paths
}

// GetLockHistory returns one page of the past locks of a directory,
// oldest (lowest epoch) first.
func (srv *Server) GetLockHistory(ctx context.Context, req *bfspb.GetLockHistoryRequest) (*bfspb.GetLockHistoryResponse, error) {
	s, notLeader := leading[*bfspb.GetLockHistoryResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	resp, err := s.lockHistory(req)
	if err != nil {
		code, msg := statusOf(err)
		return &bfspb.GetLockHistoryResponse{Status: code, Message: msg}, nil
	}
	return resp, nil
}

func (s *term) lockHistory(req *bfspb.GetLockHistoryRequest) (*bfspb.GetLockHistoryResponse, error) {
	after, err := parsePageToken(tokenHistory, req.PageToken)
	if err != nil {
		return nil, err
	}
	var afterEpoch uint64
	if after != "" {
		if afterEpoch, err = strconv.ParseUint(after, 10, 64); err != nil {
			return nil, namespaceInvalid("bad page token: pass the next_page_token of the same listing")
		}
	}
	// A directory keeps at most namespace.MaxHistory entries: reading
	// them all for a page costs little.
	entries, err := s.ns.History(req.Path)
	if err != nil {
		return nil, err
	}
	entries = entries[sort.Search(len(entries), func(i int) bool { return entries[i].Epoch > afterEpoch }):]
	resp := &bfspb.GetLockHistoryResponse{}
	var budget pageBudget
	for i, e := range entries {
		if i == pageSize(req.PageSize) || !budget.fits(e) {
			resp.NextPageToken = pageToken(tokenHistory, strconv.FormatUint(resp.Entries[i-1].Epoch, 10))
			break
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}
