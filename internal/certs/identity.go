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

func parseKind(s string) (Kind, bool) {
	for _, k := range []Kind{KindNode, KindAdmin, KindClient} {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// Identity is who a certificate names.
type Identity struct {
	Kind Kind
	Name string
}

// String is "kind/name", as in the certificate's URI.
func (id Identity) String() string { return id.Kind.String() + "/" + id.Name }

// URI is the subject alternative name carrying id in a certificate.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: uriScheme, Host: id.Kind.String(), Path: "/" + id.Name}
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
	kind, ok := parseKind(u.Host)
	name := strings.TrimPrefix(u.Path, "/")
	if !ok || !strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Identity{}, fmt.Errorf("%w: malformed URI %q", ErrNoIdentity, u.String())
	}
	if err := checkName(name); err != nil {
		return Identity{}, fmt.Errorf("%w: URI %q: %v", ErrNoIdentity, u.String(), err)
	}
	return Identity{Kind: kind, Name: name}, nil
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
