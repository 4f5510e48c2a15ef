package certs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Info describes one certificate of a certificates directory.
type Info struct {
	// File is the certificate's file name in the directory.
	File string
	// CA says it is a CA certificate; Identity is zero then.
	CA       bool
	Identity Identity
	// Hosts are the IP addresses and DNS names a node certificate serves.
	Hosts    []string
	NotAfter time.Time
	// KeyFile is the name of its private key's file in the directory, ""
	// when there is none (always, for a CA).
	KeyFile string
	// Err says why the file (or its identity) did not read; the other
	// fields are then what could be read.
	Err error
}

// List describes the certificates of dir (every *.crt file), CAs first,
// then by file name.
func List(dir string) ([]Info, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".crt") || strings.HasPrefix(name, ".") {
			continue
		}
		out = append(out, describe(dir, name)...)
	}
	slices.SortStableFunc(out, func(a, b Info) int {
		if a.CA != b.CA {
			if a.CA {
				return -1
			}
			return 1
		}
		return strings.Compare(a.File, b.File)
	})
	return out, nil
}

// describe reads the certificates of file.
func describe(dir, file string) []Info {
	cs, err := readCerts(filepath.Join(dir, file))
	if err != nil {
		return []Info{{File: file, Err: err}}
	}
	keyFile := ""
	if k := strings.TrimSuffix(file, ".crt") + ".key"; file != CAFile {
		if _, err := os.Lstat(filepath.Join(dir, k)); !errors.Is(err, os.ErrNotExist) {
			keyFile = k
		}
	}
	var out []Info
	for _, c := range cs {
		in := Info{File: file, CA: c.IsCA, NotAfter: c.NotAfter, KeyFile: keyFile}
		if !c.IsCA {
			in.Identity, in.Err = IdentityOf(c)
			in.Hosts = append(in.Hosts, c.DNSNames...)
			for _, ip := range c.IPAddresses {
				in.Hosts = append(in.Hosts, ip.String())
			}
		}
		out = append(out, in)
	}
	return out
}
