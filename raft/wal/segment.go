package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/isle-cluster/isle/raft/atomicfile"
)

const (
	segmentExt = ".wal"
	tmpExt     = ".tmp"
)

// segment identifies one segment file.
type segment struct {
	seq   uint64 // sequence number, consecutive
	first uint64 // index of the first entry expected in it; 0 = unknown
}

func (s segment) name() string { return fmt.Sprintf("%016x-%016x%s", s.seq, s.first, segmentExt) }

// parseSegmentName parses "%016x-%016x.wal".
func parseSegmentName(name string) (segment, bool) {
	base, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(base) != 33 || base[16] != '-' {
		return segment{}, false
	}
	seq, err1 := parseHex16(base[:16])
	first, err2 := parseHex16(base[17:])
	if err1 != nil || err2 != nil {
		return segment{}, false
	}
	return segment{seq: seq, first: first}, true
}

func parseHex16(s string) (uint64, error) {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, fmt.Errorf("not lower-case hex: %q", s)
		}
	}
	return strconv.ParseUint(s, 16, 64)
}

// listDir returns the segments in dir sorted by sequence number, and the
// names of leftover temporary files.
func listDir(dir string) (segs []segment, tmps []string, others []string, err error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, de := range des {
		name := de.Name()
		if s, ok := parseSegmentName(name); ok && de.Type().IsRegular() {
			segs = append(segs, s)
			continue
		}
		if strings.HasSuffix(name, segmentExt+tmpExt) {
			tmps = append(tmps, name)
			continue
		}
		others = append(others, name)
	}
	slices.SortFunc(segs, func(a, b segment) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return segs, tmps, others, nil
}

// createSegment atomically creates segment s in dir with the given content:
// it writes a temporary file, syncs it, renames it into place and syncs the
// directory. It returns the open file, positioned for writing at len(content).
func createSegment(dir string, s segment, content []byte) (*os.File, error) {
	final := filepath.Join(dir, s.name())
	tmp := final + tmpExt
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		return fail(err)
	}
	if err := fdatasync(f); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		// The rename happened but may not be durable; the file is usable.
		f.Close()
		return nil, err
	}
	return f, nil
}
