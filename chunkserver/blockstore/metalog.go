package blockstore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/golang/glog"
)

// The meta log's on-disk format (see doc.go for its role):
//
//	log    := magic "BFSMLOG\x01" frame*
//	frame  := marker u32 | length u32 | CRC32C of payload u32 | payload
//	payload:= record+
//	record := kind u8 | block id u64 | body length u32 | body
//
// all little-endian. A frame is what one group commit writes and
// fdatasyncs; the marker lets recovery look for intact frames past a
// damaged one. A record of kind recMeta carries a replica's whole meta
// file, one of kind recDelete (no body) says the replica was deleted.
const (
	logDir       = "metalog"
	logExt       = ".log"
	frameMarker  = 0x4d46_5342 // "BSFM"
	frameHeader  = 12
	recordHeader = 13
	// maxFrame bounds a frame's payload; a longer length field is damage.
	maxFrame = 64 << 20
)

var logMagic = [8]byte{'B', 'F', 'S', 'M', 'L', 'O', 'G', 1}

// recordKind says what a log record holds.
type recordKind byte

const (
	recMeta   recordKind = 1
	recDelete recordKind = 2
)

// logRecord is one record of the meta log.
type logRecord struct {
	kind recordKind
	id   BlockID
	// body is the meta file of the replica (recMeta); nil for recDelete.
	body []byte
	// gen is the generation of the log it was read from.
	gen uint64
}

// metaRecord returns the log record of a replica's meta and, aliasing
// it, the meta file it carries.
func metaRecord(m meta, crcs []uint32) (rec, img []byte) {
	rec = make([]byte, recordHeader, recordHeader+metaLen(m.size))
	putRecordHeader(rec, recMeta, m.id, metaLen(m.size))
	rec = appendMeta(rec, m, crcs)
	return rec, rec[recordHeader:]
}

// deleteRecord returns the log record of a replica's deletion.
func deleteRecord(id BlockID) []byte {
	rec := make([]byte, recordHeader)
	putRecordHeader(rec, recDelete, id, 0)
	return rec
}

func putRecordHeader(rec []byte, kind recordKind, id BlockID, n int) {
	rec[0] = byte(kind)
	binary.LittleEndian.PutUint64(rec[1:], uint64(id))
	binary.LittleEndian.PutUint32(rec[9:], uint32(n))
}

// sealFrame fills in the header of frame, whose first frameHeader bytes
// were reserved for it.
func sealFrame(frame []byte) {
	le := binary.LittleEndian
	le.PutUint32(frame, frameMarker)
	le.PutUint32(frame[4:], uint32(len(frame)-frameHeader))
	le.PutUint32(frame[8:], Checksum(frame[frameHeader:]))
}

// logName is the file name of the log of generation gen.
func logName(gen uint64) string { return fmt.Sprintf("%016x%s", gen, logExt) }

// createLog creates the (empty) log of generation gen and makes it
// durable, entry included, before any record goes into it. A log it
// could not make is removed, so that a later attempt can.
func createLog(dir string, gen uint64) (*os.File, error) {
	path := filepath.Join(dir, logName(gen))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(logMagic[:])
	if err == nil {
		err = fdatasync(f)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return f, nil
}

// logFile is a log found in the meta log directory.
type logFile struct {
	gen  uint64
	path string
}

// listLogs returns the logs in dir, oldest first. Other files are left
// alone (and logged).
func listLogs(dir string) ([]logFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var logs []logFile
	for _, e := range entries {
		hex, ok := strings.CutSuffix(e.Name(), logExt)
		gen, err := strconv.ParseUint(hex, 16, 64)
		if !ok || err != nil || len(hex) != 16 || !e.Type().IsRegular() {
			glog.Warningf("blockstore: ignoring %s in the meta log directory", e.Name())
			continue
		}
		logs = append(logs, logFile{gen: gen, path: filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(logs, func(a, b logFile) int { return cmp.Compare(a.gen, b.gen) })
	return logs, nil
}

// readLog returns the records of the log at path, in order. A torn tail,
// what a crash leaves of the last group commit, is dropped: its records
// were never acknowledged. Damage anywhere else is ErrCorrupt: records
// that were acknowledged would be lost.
func readLog(path string) ([]logRecord, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := checkLogMagic(buf); err != nil {
		return nil, fmt.Errorf("%w: meta log %s: %v", ErrCorrupt, path, err)
	}
	var recs []logRecord
	for off := len(logMagic); off < len(buf); {
		payload, err := frameAt(buf, off)
		if err != nil {
			if next := nextFrame(buf, off+1); next >= 0 {
				return nil, fmt.Errorf("%w: meta log %s: frame at byte %d: %v, yet an intact frame follows at byte %d", ErrCorrupt, path, off, err, next)
			}
			glog.Warningf("blockstore: meta log %s: dropping a torn tail of %d bytes at byte %d (%v)", path, len(buf)-off, off, err)
			break
		}
		if recs, err = decodeRecords(recs, payload); err != nil {
			return nil, fmt.Errorf("%w: meta log %s: frame at byte %d: %v", ErrCorrupt, path, off, err)
		}
		off += frameHeader + len(payload)
	}
	return recs, nil
}

// checkLogMagic accepts a log that starts with the magic, and one a crash
// cut while it was being created (empty, or zeros or part of the magic).
func checkLogMagic(buf []byte) error {
	n := min(len(buf), len(logMagic))
	if [8]byte(append(buf[:n:n], logMagic[n:]...)) == logMagic || allZero(buf) {
		return nil
	}
	return fmt.Errorf("bad magic %q", buf[:n])
}

// frameAt returns the payload of the frame at off, checked.
func frameAt(buf []byte, off int) ([]byte, error) {
	rest := buf[off:]
	le := binary.LittleEndian
	if len(rest) < frameHeader {
		return nil, fmt.Errorf("%d bytes, short of a frame header", len(rest))
	}
	n := int(le.Uint32(rest[4:]))
	switch {
	case le.Uint32(rest) != frameMarker:
		return nil, fmt.Errorf("no frame marker")
	case n == 0 || n > maxFrame:
		return nil, fmt.Errorf("frame length %d", n)
	case frameHeader+n > len(rest):
		return nil, fmt.Errorf("frame of %d bytes, %d in the file", n, len(rest)-frameHeader)
	}
	payload := rest[frameHeader : frameHeader+n]
	if Checksum(payload) != le.Uint32(rest[8:]) {
		return nil, errors.New("frame checksum mismatch")
	}
	return payload, nil
}

// nextFrame returns the offset of the first intact frame at or past
// from, or -1. A group commit writes one frame and fdatasyncs it before it
// writes the next, so a crash can only tear the last frame of a log:
// past a torn frame there is nothing intact, and past a damaged frame
// that was committed there usually is.
func nextFrame(buf []byte, from int) int {
	var marker [4]byte
	binary.LittleEndian.PutUint32(marker[:], frameMarker)
	for from < len(buf) {
		i := bytes.Index(buf[from:], marker[:])
		if i < 0 {
			return -1
		}
		if _, err := frameAt(buf, from+i); err == nil {
			return from + i
		}
		from += i + 1
	}
	return -1
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeRecords appends the records of a frame's payload to recs,
// checking every meta they carry.
func decodeRecords(recs []logRecord, payload []byte) ([]logRecord, error) {
	le := binary.LittleEndian
	for len(payload) > 0 {
		if len(payload) < recordHeader {
			return nil, fmt.Errorf("record header of %d bytes", len(payload))
		}
		r := logRecord{kind: recordKind(payload[0]), id: BlockID(le.Uint64(payload[1:]))}
		n := int(le.Uint32(payload[9:]))
		if n > len(payload)-recordHeader {
			return nil, fmt.Errorf("record of block %d: %d bytes, %d left", r.id, n, len(payload)-recordHeader)
		}
		if n > 0 {
			r.body = payload[recordHeader : recordHeader+n]
		}
		if err := r.check(); err != nil {
			return nil, err
		}
		recs = append(recs, r)
		payload = payload[recordHeader+n:]
	}
	return recs, nil
}

func (r logRecord) check() error {
	switch r.kind {
	case recDelete:
		if r.body != nil {
			return fmt.Errorf("delete record of block %d with a body", r.id)
		}
	case recMeta:
		m, _, err := decodeMeta(r.body)
		if err != nil {
			return fmt.Errorf("record of block %d: %w", r.id, err)
		}
		if m.id != r.id {
			return fmt.Errorf("record of block %d holds the meta of block %d", r.id, m.id)
		}
	default:
		return fmt.Errorf("record of block %d: unknown kind %d", r.id, r.kind)
	}
	return nil
}

// readLogs replays the logs in dir, oldest first, and returns the last
// record of every replica they mention.
func readLogs(logs []logFile) (map[BlockID]logRecord, error) {
	last := make(map[BlockID]logRecord)
	for _, l := range logs {
		recs, err := readLog(l.path)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			r.gen = l.gen
			last[r.id] = r
		}
	}
	return last, nil
}
