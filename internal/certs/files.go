package certs

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"runtime"
)

// readCerts returns every certificate of the PEM file at path.
func readCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return out, nil
}

// readKeyPEM returns the PEM file at path, a private key, after checking
// that only its owner may read it.
func readKeyPEM(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkKeyMode(path, fi.Mode()); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// ErrKeyReadable is wrapped by the error refusing a private key that its
// group or others may read.
var ErrKeyReadable = errors.New("private key readable by group or others")

func checkKeyMode(path string, mode os.FileMode) error {
	if runtime.GOOS == "windows" { // no Unix permission bits to check
		return nil
	}
	if mode.Perm()&0o077 != 0 {
		return fmt.Errorf("%s: %w (mode %v): chmod 600 %s", path, ErrKeyReadable, mode.Perm(), path)
	}
	return nil
}

// readKey returns the private key in the PEM file at path (PKCS #8, or
// SEC 1 for an EC key).
func readKey(path string) (crypto.Signer, error) {
	data, err := readKeyPEM(path)
	if err != nil {
		return nil, err
	}
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%s: no PEM private key", path)
		}
		switch b.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("%s: a %T cannot sign", path, k)
			}
			return s, nil
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return k, nil
		}
	}
}
