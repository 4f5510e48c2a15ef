package namespace

// Cleaning records: what a cleaning drains (the files open for write in
// the subtree when it began) and which locked directories it unlocks
// when done, one record per cleaning, under the directory it began at.

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/golang/glog"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// getCleaning reads the cleaning record of directory dir; nil if it has
// none.
func getCleaning(r pebble.Reader, dir uint64) (*bfspb.CleaningRecord, error) {
	v, closer, err := r.Get(cleanKey(dir))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	rec := &bfspb.CleaningRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		return nil, fmt.Errorf("namespace: corrupt cleaning record of directory %d: %w", dir, err)
	}
	return rec, nil
}

// putCleaning stores rec as directory dir's cleaning record.
func putCleaning(b *pebble.Batch, dir uint64, rec *bfspb.CleaningRecord) error {
	v, err := proto.Marshal(rec)
	if err != nil {
		return err
	}
	return b.Set(cleanKey(dir), v, nil)
}

// Cleaning is a directory whose cleaning is in progress.
type Cleaning struct {
	Path   string
	Record *bfspb.CleaningRecord
	Dir    *bfspb.FileInfo
}

// Cleanings returns every directory found CLEANING (to resume after a
// restart).
func (s *Store) Cleanings() ([]Cleaning, error) {
	lower, upper := prefixBounds(prefixClean)
	var out []Cleaning
	err := scanKeys(s.db, lower, upper, func(k, v []byte) error {
		rec := &bfspb.CleaningRecord{}
		if err := proto.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("namespace: corrupt cleaning record %x: %w", k, err)
		}
		path, info, err := pathOf(s.db, decodeUint64(k[1:]))
		if errors.Is(err, ErrNotFound) {
			// A record outliving its directory cannot finish anything;
			// refusing to start over it would take the namespace down.
			glog.Errorf("namespace: cleaning record of epoch %d names directory %d, which is gone; ignoring it", rec.Epoch, decodeUint64(k[1:]))
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, Cleaning{Path: path, Record: rec, Dir: info})
		return nil
	})
	return out, err
}
