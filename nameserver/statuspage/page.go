package statuspage

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Locks is the nameserver's view of directory locks: its ListDirLocks,
// GetDirLock and GetLockHistory answers, which the page pages and
// filters exactly as lockctl and the SDK do.
type Locks interface {
	ListDirLocks(context.Context, *bfspb.ListDirLocksRequest) (*bfspb.ListDirLocksResponse, error)
	GetDirLock(context.Context, *bfspb.GetDirLockRequest) (*bfspb.GetDirLockResponse, error)
	GetLockHistory(context.Context, *bfspb.GetLockHistoryRequest) (*bfspb.GetLockHistoryResponse, error)
}

// Sessions lists the live sessions, paged.
type Sessions interface {
	ListSessions(context.Context, *bfspb.ListSessionsRequest) (*bfspb.ListSessionsResponse, error)
}

// Chunkservers lists the chunkservers the nameserver knows, paged.
type Chunkservers interface {
	ListChunkservers(context.Context, *bfspb.ListChunkserversRequest) (*bfspb.ListChunkserversResponse, error)
}

// SafeMode reports the nameserver's safe mode.
type SafeMode interface {
	GetSafeMode(context.Context, *bfspb.GetSafeModeRequest) (*bfspb.GetSafeModeResponse, error)
}

// LockEvents is the feed of lock transitions the recent history is made
// of. Subscribe returns the transitions from now on, in the order they
// happened, a channel closed if the subscriber fell too far behind (it
// then subscribes again, and the history records the gap), and cancel,
// which ends the subscription.
type LockEvents interface {
	Subscribe() (events <-chan *bfspb.DirLockEvent, lagged <-chan struct{}, cancel func())
}

// Leadership says who leads the nameserver group. Without one (a page
// that is given none) the page says "single nameserver".
type Leadership interface {
	Leader() Leader
}

// Leader is the leader of the nameserver group as one member sees it.
type Leader struct {
	// Name and Address are the leader's member name and client address;
	// empty while no leader is known.
	Name    string `json:"name,omitempty"`
	Address string `json:"address,omitempty"`
	Term    uint64 `json:"term"`
	// Self is true on the leader itself.
	Self bool `json:"self"`
}

// Defaults of Config.
const (
	DefaultSampleInterval = 5 * time.Second
	DefaultSamples        = 120 // ten minutes at the default interval
	DefaultHistory        = 1000
)

// Config is what a Page reads and how.
type Config struct {
	// ClusterID returns the cluster's id ("" until the first leader of a
	// new group has formatted it).
	ClusterID    func() string
	Locks        Locks
	Sessions     Sessions
	Chunkservers Chunkservers
	SafeMode     SafeMode
	Events       LockEvents
	// Leadership says who leads the group (nil: the page says "single
	// nameserver").
	Leadership Leadership
	// Metrics is the nameserver's registry: the summary's figures and the
	// charts' samples are read from the metrics it exports, so the page
	// and a Prometheus scrape never disagree.
	Metrics prometheus.Gatherer
	// Public serves the page and its JSON to every client; otherwise only
	// to clients on a loopback address. It matters only without TLS: over
	// TLS the page answers admin identities only (SPEC §10).
	Public bool
	// SampleInterval is how often the charts' metrics are sampled, and
	// Samples how many samples are kept (0: the defaults).
	SampleInterval time.Duration
	Samples        int
	// History is how many lock transitions the recent history keeps (0:
	// DefaultHistory).
	History int
	// Clock is the source of time; the real clock if nil.
	Clock clock.Clock
}

func (c *Config) validate() error {
	if c.Locks == nil || c.Sessions == nil || c.Chunkservers == nil || c.SafeMode == nil || c.Events == nil || c.Metrics == nil {
		return errors.New("statuspage: Locks, Sessions, Chunkservers, SafeMode, Events and Metrics are required")
	}
	if c.SampleInterval < 0 || c.Samples < 0 || c.Samples == 1 || c.History < 0 {
		return fmt.Errorf("statuspage: sample interval %v, %d samples (a rate takes two), history of %d: out of range",
			c.SampleInterval, c.Samples, c.History)
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = DefaultSampleInterval
	}
	if c.Samples == 0 {
		c.Samples = DefaultSamples
	}
	if c.History == 0 {
		c.History = DefaultHistory
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return nil
}

// Page is the nameserver's status page and its JSON API. See the package
// documentation.
type Page struct {
	cfg       Config
	samples   *sampler
	history   *history
	templates map[string]*template.Template
	css       template.CSS
	js        template.JS
	handler   http.Handler
	stopc     chan struct{}
	donec     chan struct{}
}

// New starts sampling the metrics and following the lock transitions;
// Close stops both.
func New(cfg Config) (*Page, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Page{
		cfg:     cfg,
		samples: newSampler(cfg.Metrics, cfg.Samples),
		history: newHistory(cfg.History),
		stopc:   make(chan struct{}),
		donec:   make(chan struct{}),
	}
	var err error
	if p.templates, err = parseTemplates(); err != nil {
		return nil, fmt.Errorf("statuspage: %w", err)
	}
	css, err := templateFiles.ReadFile("templates/page.css")
	if err != nil {
		return nil, fmt.Errorf("statuspage: %w", err)
	}
	js, err := templateFiles.ReadFile("templates/page.js")
	if err != nil {
		return nil, fmt.Errorf("statuspage: %w", err)
	}
	p.css, p.js = template.CSS(css), template.JS(js) // our own files, embedded
	p.handler = p.routes()
	p.samples.sample(cfg.Clock.Now())
	events, lagged, cancel := cfg.Events.Subscribe()
	go p.run(events, lagged, cancel)
	return p, nil
}

// Close stops the page's goroutine. It is safe to call more than once.
func (p *Page) Close() {
	select {
	case <-p.stopc:
	default:
		close(p.stopc)
	}
	<-p.donec
}

// run samples the metrics every SampleInterval and records the lock
// transitions, until Close.
func (p *Page) run(events <-chan *bfspb.DirLockEvent, lagged <-chan struct{}, cancel func()) {
	defer close(p.donec)
	defer func() { cancel() }()
	tick := p.cfg.Clock.NewTimer(p.cfg.SampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.stopc:
			return
		case now := <-tick.C():
			p.samples.sample(now)
			tick.Reset(p.cfg.SampleInterval)
		case ev := <-events:
			p.history.add(ev, p.cfg.Clock.Now())
		case <-lagged:
			cancel()
			p.history.gap(p.cfg.Clock.Now())
			events, lagged, cancel = p.cfg.Events.Subscribe()
		}
	}
}

// Handler serves the page at / and its JSON under /api/, to admins over
// TLS, and in plaintext to clients on loopback addresses only unless
// Config.Public is set.
func (p *Page) Handler() http.Handler { return p.handler }

func (p *Page) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", p.html("index", p.index))
	mux.HandleFunc("GET /locks", p.html("locks", p.lockPage))
	mux.HandleFunc("GET /lock", p.html("lock", p.lockDetail))
	mux.HandleFunc("GET /sessions", p.html("sessions", p.sessionPage))
	mux.HandleFunc("GET /chunkservers", p.html("chunkservers", p.chunkserverPage))
	mux.HandleFunc("GET /history", p.html("history", p.historyPage))
	mux.HandleFunc("GET /api/status", p.json(p.summaryAPI))
	mux.HandleFunc("GET /api/locks", p.json(p.lockPage))
	mux.HandleFunc("GET /api/lock", p.json(p.lockDetail))
	mux.HandleFunc("GET /api/sessions", p.json(p.sessionPage))
	mux.HandleFunc("GET /api/chunkservers", p.json(p.chunkserverPage))
	mux.HandleFunc("GET /api/history", p.json(p.historyPage))
	mux.HandleFunc("GET /api/samples", p.json(p.samplesAPI))
	return p.guard(mux)
}

// guard keeps the page to those allowed to see it. Over TLS (a secure
// nameserver) that is an admin: the request must carry a verified admin
// certificate, whatever its address. In plaintext (an insecure one) there
// is nobody to tell apart, so the page answers clients on loopback
// addresses only, unless Config.Public.
func (p *Page) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			if id, ok := certs.PeerIdentity(r.Context()); !ok || id.Kind != certs.KindAdmin {
				http.Error(w, "the status page answers admins only: present an admin certificate (bfs cert create-client NAME --admin)",
					http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if !p.cfg.Public && !loopback(r) {
			http.Error(w, "the status page answers clients on loopback addresses only: "+
				"start the nameserver with --status-public to serve it to others", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopback reports whether the request comes from a loopback address.
func loopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
