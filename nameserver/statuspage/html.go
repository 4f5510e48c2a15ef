package statuspage

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/proto/bfspb"
)

//go:embed templates/*.html templates/page.css templates/page.js
var templateFiles embed.FS

// pages are the HTML pages, each a template named after it that
// defines "content" inside the shared layout.
var pages = []string{"index", "locks", "lock", "sessions", "chunkservers", "history"}

// pageData is what every HTML page renders.
type pageData struct {
	Name      string
	Now       time.Time
	ClusterID string
	Leader    *Leader
	Query     url.Values
	// Refresh, if positive, has the page's script fetch the page again
	// every that many seconds.
	Refresh int
	Error   string
	CSS     template.CSS
	JS      template.JS
	Data    any
}

func parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"show":  printable.String,
		"bytes": humanBytes,
		"pct": func(part, whole int64) string {
			if whole <= 0 {
				return "–"
			}
			return fmt.Sprintf("%.0f%%", 100*float64(part)/float64(whole))
		},
		// share is part's share of whole in whole percent, for a bar.
		"share": func(part, whole int64) int64 {
			if whole <= 0 {
				return 0
			}
			return min(max(100*part/whole, 0), 100)
		},
		"ms":       func(ms int64) string { return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String() },
		"when":     when,
		"withp":    withParam,
		"sub":      func(a, b int64) int64 { return a - b },
		"percent":  func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
		"rate":     perSecond,
		"byterate": bytesPerSecond,
	}
	out := make(map[string]*template.Template, len(pages))
	for _, name := range pages {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFiles,
			"templates/layout.html", "templates/tables.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// when writes a time as the page shows it (the server's local time).
func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.Local().Format("2006-01-02 15:04:05")
	case *time.Time:
		if v == nil {
			return ""
		}
		return when(*v)
	}
	return ""
}

// withParam is the query q with key set to value ("" removes it), as a
// relative URL's "?...".
func withParam(q url.Values, key string, value any) template.URL {
	c := url.Values{}
	for k, v := range q {
		c[k] = v
	}
	s := fmt.Sprint(value)
	if s == "" || s == "0" {
		c.Del(key)
	} else {
		c.Set(key, s)
	}
	return template.URL("?" + c.Encode())
}

// html serves what load reads through the page's template name.
func (p *Page) html(name string, load loader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := load(r)
		data := pageData{Name: name, Now: p.cfg.Clock.Now(), ClusterID: p.cfg.ClusterID(), Query: r.URL.Query(),
			CSS: p.css, JS: p.js, Data: v}
		if p.cfg.Leadership != nil {
			l := p.cfg.Leadership.Leader()
			data.Leader = &l
		}
		if rf, ok := v.(interface{ refresh() int }); ok {
			data.Refresh = rf.refresh()
		}
		code := http.StatusOK
		if err != nil {
			code, data.Error = httpStatus(err), err.Error()
		}
		var buf bytes.Buffer
		if err := p.templates[name].ExecuteTemplate(&buf, "layout", data); err != nil {
			glog.Errorf("status page %s: %v", name, err)
			http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_, _ = w.Write(buf.Bytes()) // a client gone away is no error of ours
	}
}

// indexView is the summary page: the cluster at a glance and the first
// rows of each table.
type indexView struct {
	Summary      Summary
	Charts       []chart
	Cleanings    LockPage
	Locks        LockPage
	Chunkservers ChunkserverPage
	Sessions     SessionPage
	History      HistoryPage
}

func (indexView) refresh() int { return 5 }

func (p *Page) index(r *http.Request) (any, error) {
	ctx := r.Context()
	var v indexView
	var err error
	if v.Summary, err = p.summary(ctx); err != nil {
		return nil, err
	}
	v.Charts = p.charts()
	cleaning := &bfspb.ListDirLocksRequest{FilterStatus: true, Status: bfspb.LockStatus_LOCK_STATUS_CLEANING}
	if v.Cleanings, err = p.listLocks(ctx, cleaning, indexRows); err != nil {
		return nil, err
	}
	if v.Locks, err = p.listLocks(ctx, &bfspb.ListDirLocksRequest{}, indexRows); err != nil {
		return nil, err
	}
	if v.Chunkservers, err = p.listChunkservers(ctx, &bfspb.ListChunkserversRequest{PageSize: indexRows}); err != nil {
		return nil, err
	}
	if v.Sessions, err = p.listSessions(ctx, &bfspb.ListSessionsRequest{PageSize: indexRows}); err != nil {
		return nil, err
	}
	v.History = p.recent(0, indexRows/2)
	return v, nil
}

// refresh has a lock's page follow it while it is cleaning.
func (d LockDetail) refresh() int {
	if d.State == "CLEANING" {
		return 2
	}
	return 0
}
