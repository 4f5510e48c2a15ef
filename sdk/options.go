package sdk

import (
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/clock"
)

// DefaultSessionTTL is the session time-to-live the SDK asks for unless
// WithSessionTTL says otherwise.
const DefaultSessionTTL = 10 * time.Second

// closeSessionTimeout bounds the best-effort CloseSession call in Close.
const closeSessionTimeout = 2 * time.Second

// An Option configures Dial.
type Option func(*options)

type options struct {
	holder string
	ttl    time.Duration
	// certsDir and user name the client certificate of WithCertsDir;
	// certsDir "" means plaintext.
	certsDir, user string
	dialOptions    []grpc.DialOption
	// clock is where the Client takes time and timers from; only tests
	// set another than the real one (export_test.go).
	clock clock.Clock
}

func defaultOptions() options {
	return options{ttl: DefaultSessionTTL, clock: clock.Real{}}
}

// transportCredentials are the credentials of every connection the client
// makes, to the nameserver and to chunkservers alike: mutual TLS with the
// certificate of WithCertsDir, read again when its files change, or
// plaintext.
func (o *options) transportCredentials() (credentials.TransportCredentials, error) {
	var c *certs.Creds
	if o.certsDir != "" {
		var err error
		if c, err = certs.LoadClient(o.certsDir, o.user); err != nil {
			return nil, err
		}
	}
	return certs.TransportCredentials(c), nil
}

// dataDialOptions are added to connections to chunkservers: block data
// moves in large streams, which wide flow-control windows and buffers keep
// from stalling on window updates.
var dataDialOptions = []grpc.DialOption{
	grpc.WithInitialWindowSize(16 << 20),
	grpc.WithInitialConnWindowSize(16 << 20),
	grpc.WithWriteBufferSize(1 << 20),
	grpc.WithReadBufferSize(1 << 20),
	grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8 << 20)),
}

func (o *options) validate() error {
	if o.ttl < time.Millisecond {
		return fmt.Errorf("%w: session TTL %v is under a millisecond", ErrInvalidArgument, o.ttl)
	}
	return nil
}

// WithHolder sets the holder id recorded with the client's session and the
// directory locks it takes. The default is "ip:port:timestamp" of this
// process (see Dial).
func WithHolder(holder string) Option {
	return func(o *options) { o.holder = holder }
}

// WithSessionTTL sets the session time-to-live asked of the nameserver
// (default DefaultSessionTTL). The session is kept alive every ttl/3.
func WithSessionTTL(ttl time.Duration) Option {
	return func(o *options) { o.ttl = ttl }
}

// WithCertsDir has the client speak mutual TLS 1.3 with the certificate of
// user in the certificates directory dir (client.USER.crt and .key, and
// the CA in ca.crt: the layout `bfs cert` makes), read again whenever the
// files change. Without it, or with dir "", the client speaks plaintext,
// which only a cluster run with --insecure accepts.
func WithCertsDir(dir, user string) Option {
	return func(o *options) { o.certsDir, o.user = dir, user }
}

// WithDialOptions adds gRPC dial options to every connection the client
// makes, after the SDK's own (a transport credentials option among them
// replaces WithCertsDir's).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// A CreateOption configures Touch.
type CreateOption func(*createOptions)

type createOptions struct {
	overwrite   bool
	replication int
	mode        os.FileMode
}

func defaultCreateOptions() createOptions {
	return createOptions{mode: 0o644}
}

// Overwrite lets the call replace an existing file. Without it an existing
// file is an ErrExists.
func Overwrite() CreateOption {
	return func(o *createOptions) { o.overwrite = true }
}

// Replication sets the number of replicas of the file's blocks; 0 (the
// default) leaves the choice to the nameserver.
func Replication(n int) CreateOption {
	return func(o *createOptions) { o.replication = n }
}

// Mode sets the permission bits of the new file (default 0644).
func Mode(m os.FileMode) CreateOption {
	return func(o *createOptions) { o.mode = m }
}
