package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Page sizes: what a table shows unless ?limit= says otherwise, and the
// most it may ask for (the nameserver caps its pages too).
const (
	defaultLimit = 100
	maxLimit     = 1000
	// The index shows the first rows of each table.
	indexRows = 20
)

// httpError is a load's failure with the HTTP status it answers.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// statusError is the error of an answer with status code (nil for OK).
func statusError(what string, code bfspb.StatusCode, msg string) error {
	if code == bfspb.StatusCode_OK {
		return nil
	}
	status := http.StatusInternalServerError
	switch code {
	case bfspb.StatusCode_INVALID_ARGUMENT:
		status = http.StatusBadRequest
	case bfspb.StatusCode_NOT_FOUND, bfspb.StatusCode_NOT_DIRECTORY:
		status = http.StatusNotFound
	case bfspb.StatusCode_UNAVAILABLE, bfspb.StatusCode_NOT_LEADER:
		status = http.StatusServiceUnavailable
	}
	return &httpError{status, fmt.Sprintf("%s: %s: %s", what, code, msg)}
}

// answer is the error of an RPC's answer: the call's own, or that of its
// status code.
func answer(what string, resp interface {
	GetStatus() bfspb.StatusCode
	GetMessage() string
}, err error) error {
	if err != nil {
		return err
	}
	return statusError(what, resp.GetStatus(), resp.GetMessage())
}

func httpStatus(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.code
	}
	return http.StatusInternalServerError
}

// loader reads what one page or endpoint shows.
type loader func(*http.Request) (any, error)

// json serves what load reads as JSON; a failure is {"error": "..."}
// with its HTTP status.
func (p *Page) json(load loader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := load(r)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			w.WriteHeader(httpStatus(err))
			v = map[string]string{"error": err.Error()}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v) // a client gone away is no error of ours
	}
}

// limitOf is the ?limit= of r, def if absent.
func limitOf(r *http.Request, def int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		return 0, badRequest("limit must be a whole number from 1 to %d, got %q", maxLimit, s)
	}
	return n, nil
}

func (p *Page) summaryAPI(r *http.Request) (any, error) { return p.summary(r.Context()) }

// Samples is the charts' data: the charted counters' rates over each
// sampling interval, oldest first.
type Samples struct {
	IntervalMs int64  `json:"interval_ms"`
	Rates      []Rate `json:"rates"`
}

func (p *Page) samplesAPI(*http.Request) (any, error) {
	return Samples{IntervalMs: p.cfg.SampleInterval.Milliseconds(), Rates: rates(p.samples.all())}, nil
}

// LockPage is one page of the locked and cleaning directories.
type LockPage struct {
	Prefix string `json:"prefix"`
	// State, Holder filter the locks ("" keeps all).
	State  string `json:"state,omitempty"`
	Holder string `json:"holder,omitempty"`
	Locks  []Lock `json:"locks"`
	// NextPage is the ?page= of the next page; empty on the last.
	NextPage string `json:"next_page,omitempty"`
}

// lockPage serves /locks?prefix=&state=locked|cleaning&holder=&limit=&page=.
func (p *Page) lockPage(r *http.Request) (any, error) {
	q := r.URL.Query()
	limit, err := limitOf(r, defaultLimit)
	if err != nil {
		return nil, err
	}
	req := &bfspb.ListDirLocksRequest{Prefix: q.Get("prefix"), Holder: q.Get("holder"),
		PageSize: uint32(limit), PageToken: q.Get("page")}
	switch st := q.Get("state"); st {
	case "":
	case "locked", "LOCKED":
		req.FilterStatus, req.Status = true, bfspb.LockStatus_LOCK_STATUS_LOCKED
	case "cleaning", "CLEANING":
		req.FilterStatus, req.Status = true, bfspb.LockStatus_LOCK_STATUS_CLEANING
	default:
		return nil, badRequest("state must be locked or cleaning, got %q", st)
	}
	return p.listLocks(r.Context(), req, limit)
}

// listLocks reads pages until it has limit locks or the listing ends: a
// filtered page may come back short (the nameserver bounds the locks one
// page looks at).
func (p *Page) listLocks(ctx context.Context, req *bfspb.ListDirLocksRequest, limit int) (LockPage, error) {
	page := LockPage{Prefix: req.Prefix, Holder: req.Holder, Locks: []Lock{}}
	if page.Prefix == "" {
		page.Prefix = "/"
	}
	if req.FilterStatus {
		page.State = stateName(req.Status)
	}
	for {
		req.PageSize = uint32(limit - len(page.Locks))
		resp, err := p.cfg.Locks.ListDirLocks(ctx, req)
		if err := answer("list locks", resp, err); err != nil {
			return LockPage{}, err
		}
		for _, d := range resp.GetLocks() {
			page.Locks = append(page.Locks, lockOf(d))
		}
		page.NextPage = resp.GetNextPageToken()
		if page.NextPage == "" || len(page.Locks) >= limit {
			return page, nil
		}
		req.PageToken = page.NextPage
	}
}

// lockDetail serves /lock?path=: one directory's lock, the files its
// cleaning still waits for, and its stored history.
func (p *Page) lockDetail(r *http.Request) (any, error) {
	path := r.URL.Query().Get("path")
	if path == "" {
		return nil, badRequest("name a directory: ?path=/dir")
	}
	resp, err := p.cfg.Locks.GetDirLock(r.Context(), &bfspb.GetDirLockRequest{Path: path})
	if err := answer("lock of "+path, resp, err); err != nil {
		return nil, err
	}
	d := LockDetail{Lock: lockOf(resp.GetLock()), History: []HistoryEntry{}}
	d.Pending = pendingOf(resp.GetLock())
	req := &bfspb.GetLockHistoryRequest{Path: path}
	for {
		h, err := p.cfg.Locks.GetLockHistory(r.Context(), req)
		if err := answer("lock history of "+path, h, err); err != nil {
			return nil, err
		}
		for _, e := range h.GetEntries() {
			d.History = append(d.History, historyOf(e))
		}
		if req.PageToken = h.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	slices.Reverse(d.History)
	return d, nil
}

// SessionPage is one page of the live sessions.
type SessionPage struct {
	Holder   string    `json:"holder,omitempty"`
	Sessions []Session `json:"sessions"`
	NextPage string    `json:"next_page,omitempty"`
}

// sessionPage serves /sessions?holder=&limit=&page=.
func (p *Page) sessionPage(r *http.Request) (any, error) {
	limit, err := limitOf(r, defaultLimit)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	return p.listSessions(r.Context(), &bfspb.ListSessionsRequest{Holder: q.Get("holder"), PageSize: uint32(limit), PageToken: q.Get("page")})
}

func (p *Page) listSessions(ctx context.Context, req *bfspb.ListSessionsRequest) (SessionPage, error) {
	resp, err := p.cfg.Sessions.ListSessions(ctx, req)
	if err := answer("list sessions", resp, err); err != nil {
		return SessionPage{}, err
	}
	page := SessionPage{Holder: req.Holder, Sessions: []Session{}, NextPage: resp.GetNextPageToken()}
	for _, s := range resp.GetSessions() {
		page.Sessions = append(page.Sessions, sessionOf(s))
	}
	return page, nil
}

// ChunkserverPage is one page of the chunkservers, by address.
type ChunkserverPage struct {
	Chunkservers []Chunkserver `json:"chunkservers"`
	NextPage     string        `json:"next_page,omitempty"`
}

// chunkserverPage serves /chunkservers?limit=&page=.
func (p *Page) chunkserverPage(r *http.Request) (any, error) {
	limit, err := limitOf(r, defaultLimit)
	if err != nil {
		return nil, err
	}
	return p.listChunkservers(r.Context(), &bfspb.ListChunkserversRequest{PageSize: uint32(limit), PageToken: r.URL.Query().Get("page")})
}

func (p *Page) listChunkservers(ctx context.Context, req *bfspb.ListChunkserversRequest) (ChunkserverPage, error) {
	resp, err := p.cfg.Chunkservers.ListChunkservers(ctx, req)
	if err := answer("list chunkservers", resp, err); err != nil {
		return ChunkserverPage{}, err
	}
	page := ChunkserverPage{Chunkservers: []Chunkserver{}, NextPage: resp.GetNextPageToken()}
	for _, c := range resp.GetChunkservers() {
		page.Chunkservers = append(page.Chunkservers, chunkserverOf(c))
	}
	return page, nil
}

// HistoryPage is one page of the recent lock transitions, newest first.
type HistoryPage struct {
	Transitions []Transition `json:"transitions"`
	// NextPage is the ?before= of the next (older) page; absent on the
	// last one.
	NextPage uint64 `json:"next_page,omitempty"`
}

// historyPage serves /history?before=&limit=.
func (p *Page) historyPage(r *http.Request) (any, error) {
	limit, err := limitOf(r, defaultLimit)
	if err != nil {
		return nil, err
	}
	var before uint64
	if s := r.URL.Query().Get("before"); s != "" {
		if before, err = strconv.ParseUint(s, 10, 64); err != nil {
			return nil, badRequest("before must be a transition's seq, got %q", s)
		}
	}
	return p.recent(before, limit), nil
}

func (p *Page) recent(before uint64, limit int) HistoryPage {
	ts, next := p.history.before(before, limit)
	if ts == nil {
		ts = []Transition{}
	}
	return HistoryPage{Transitions: ts, NextPage: next}
}
