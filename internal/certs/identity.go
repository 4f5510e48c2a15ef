package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Kind is what an identity is to the cluster.
type Kind int

// The kinds of identity. The zero Kind is none: no identity.
const (
	KindNode Kind = iota + 1
	KindAdmin
	KindClient
)

// uriScheme is the scheme of the URI naming an identity.
const uriScheme = "bfs"

func (k Kind) String() string {
	switch k {
	case KindNode:
		return "node"
	case KindAdmin:
		return "admin"
	case KindClient:
		return "client"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Role is what a node certificate lets its daemon be to the others. The
// zero Role is none: a client's or an admin's certificate, or a node
// certificate made before roles existed (bfs://node/NAME), which counts
// as a chunkserver's and never as a nameserver's.
type Role int

// The roles of a node.
const (
	RoleNameServer Role = iota + 1
	RoleChunkserver
)

func (r Role) String() string {
	switch r {
	case RoleNameServer:
		return "nameserver"
	case RoleChunkserver:
		return "chunkserver"
	case 0:
		return "none"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole reads a role's name ("nameserver" or "chunkserver").
func ParseRole(s string) (Role, error) {
	for _, r := range []Role{RoleNameServer, RoleChunkserver} {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("no role %q (nameserver or chunkserver)", s)
}

// parseKind reads the host of an identity's URI: a kind, or for a node
// with a role, the role.
func parseKind(s string) (Kind, Role, bool) {
	for _, k := range []Kind{KindNode, KindAdmin, KindClient} {
		if k.String() == s {
			return k, 0, true
		}
	}
	if r, err := ParseRole(s); err == nil {
		return KindNode, r, true
	}
	return 0, 0, false
}

// Identity is who a certificate names.
type Identity struct {
	Kind Kind
	Name string
	// Role is a node's role (RoleNameServer, RoleChunkserver), 0 for
	// others and for a node certificate made before roles.
	Role Role
}

// Label is what the identity's URI names as its kind: the role of a
// node that has one ("nameserver", "chunkserver"), the kind otherwise.
func (id Identity) Label() string {
	if id.Kind == KindNode && id.Role != 0 {
		return id.Role.String()
	}
	return id.Kind.String()
}

// String is "label/name", as in the certificate's URI.
func (id Identity) String() string { return id.Label() + "/" + id.Name }

// URI is the subject alternative name carrying id in a certificate:
// bfs://KIND/NAME, or bfs://ROLE/NAME for a node with a role.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: uriScheme, Host: id.Label(), Path: "/" + id.Name}
}

// IsNameServer reports whether id is a nameserver's: a node certificate
// made with the nameserver role. Chunkservers take their destructive
// commands only from such a peer.
func (id Identity) IsNameServer() bool { return id.Kind == KindNode && id.Role == RoleNameServer }

// IsChunkserver reports whether id may be a chunkserver's: a node
// certificate with the chunkserver role, or one made before roles.
func (id Identity) IsChunkserver() bool {
	return id.Kind == KindNode && (id.Role == RoleChunkserver || id.Role == 0)
}

// ErrNoIdentity is wrapped by the error of IdentityOf for a certificate
// that names no BFS identity.
var ErrNoIdentity = errors.New("certificate names no BFS identity")

// IdentityOf returns the identity cert names: its one bfs:// URI.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var found []*url.URL
	for _, u := range cert.URIs {
		if u.Scheme == uriScheme {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("%w (no %s:// URI; subject %q)", ErrNoIdentity, uriScheme, cert.Subject.String())
	case 1:
	default:
		return Identity{}, fmt.Errorf("%w: %d %s:// URIs, want one", ErrNoIdentity, len(found), uriScheme)
	}
	u := found[0]
	kind, role, ok := parseKind(u.Host)
	name := strings.TrimPrefix(u.Path, "/")
	if !ok || !strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Identity{}, fmt.Errorf("%w: malformed URI %q", ErrNoIdentity, u.String())
	}
	if err := checkName(name); err != nil {
		return Identity{}, fmt.Errorf("%w: URI %q: %v", ErrNoIdentity, u.String(), err)
	}
	return Identity{Kind: kind, Name: name, Role: role}, nil
}

// maxName bounds the length of a name.
const maxName = 128

// checkName refuses a name that could not be an identity's (or a file
// name's part): see the package documentation.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > maxName {
		return fmt.Errorf("name of %d characters (at most %d)", len(name), maxName)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("name %q starts with %q", name, name[0])
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:", r)
		if !ok {
			return fmt.Errorf("name %q has %q (letters, digits, '.', '_', '-' and ':' only)", name, r)
		}
	}
	return nil
}
