package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/isle-cluster/isle/raft/atomicfile"
	"go.etcd.io/raft/v3/raftpb"
)

// DefaultSegmentSize is the segment size used when Options.SegmentSize is 0.
const DefaultSegmentSize = 8 << 20

// Options configures Open.
type Options struct {
	// SegmentSize: a new segment is cut before a write once the current one
	// holds at least this many bytes. Default 8 MiB. Segments are never
	// preallocated.
	SegmentSize int64
	// Logger receives warnings (torn tails repaired, stray files); nil means
	// slog.Default().
	Logger *slog.Logger
}

// State is what Open replayed from the log.
type State struct {
	HardState raftpb.HardState        // the last one saved (empty if none)
	Snapshot  raftpb.SnapshotMetadata // the newest snapshot marker saved (zero if none)
	Entries   []raftpb.Entry          // entries after Snapshot.Index, conflicts resolved
}

// WAL is an open write-ahead log. Its methods are safe for concurrent use.
type WAL struct {
	mu      sync.Mutex
	dir     string
	dirFile *os.File // holds the directory lock
	opts    Options
	log     *slog.Logger

	page     int       // the kernel's page size: synced writes end on page boundaries
	segs     []segment // existing segments, ascending; the last one is active
	f        *os.File  // active segment
	off      int64     // end of the valid data in f
	sealed   bool      // f ends with a seal record: cut before the next write
	unsynced int64     // bytes written to f since it was last synced
	hs       raftpb.HardState
	hsTmp    raftpb.HardState // scratch for encoding
	snap     raftpb.SnapshotMetadata
	markers  []uint64 // snapshot marker indexes in the existing segments, ascending
	tr       tracker
	enc      encoder
	failed   error // the first write failure; non-nil means ErrFailed
	closed   bool
}

// Open opens (creating if needed) the WAL in dir, verifies and replays it,
// repairs a torn tail of the last segment and returns the replayed state.
// Damage that is not a torn tail is returned as a *CorruptError.
func Open(dir string, opts Options) (*WAL, *State, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := makeDir(dir); err != nil {
		return nil, nil, fmt.Errorf("wal: create directory %s: %w", dir, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: open directory %s: %w", dir, err)
	}
	if err := lockDir(d); err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("wal: lock directory %s: %w", dir, err)
	}
	w := &WAL{dir: dir, dirFile: d, opts: opts, log: opts.Logger, page: os.Getpagesize()}
	st, err := w.open()
	if err != nil {
		if w.f != nil {
			w.f.Close()
		}
		d.Close()
		return nil, nil, err
	}
	return w, st, nil
}

// makeDir creates dir if it does not exist and makes its entry durable.
func makeDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(filepath.Clean(dir)))
}

func (w *WAL) open() (*State, error) {
	segs, tmps, others, err := listDir(w.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", w.dir, err)
	}
	for _, name := range others {
		w.log.Warn("wal: ignoring unexpected file in WAL directory", "dir", w.dir, "file", name)
	}
	if len(tmps) > 0 {
		for _, name := range tmps {
			if err := os.Remove(filepath.Join(w.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("wal: remove leftover %s: %w", name, err)
			}
			w.log.Info("wal: removed leftover temporary segment", "dir", w.dir, "file", name)
		}
		if err := atomicfile.SyncDir(w.dir); err != nil {
			return nil, fmt.Errorf("wal: sync directory %s: %w", w.dir, err)
		}
	}
	if len(segs) == 0 {
		return w.create()
	}

	r, err := replay(w.dir, segs)
	if err != nil {
		return nil, err
	}
	w.segs, w.hs, w.snap, w.markers, w.tr = r.segs, r.hs, r.snap, r.markers, r.tr
	last := w.segs[len(w.segs)-1]
	path := filepath.Join(w.dir, last.name())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: open segment %s: %w", path, err)
	}
	w.f, w.off, w.sealed = f, r.lastValid, r.lastSealed
	if r.lastValid < r.lastSize {
		if err := f.Truncate(r.lastValid); err != nil {
			return nil, fmt.Errorf("wal: truncate torn tail of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("wal: sync %s after truncating its torn tail: %w", path, err)
		}
		w.log.Warn("wal: truncated torn tail of the last segment (an unfinished write from before a crash)",
			"file", path, "offset", r.lastValid, "dropped_bytes", r.lastSize-r.lastValid, "reason", r.lastReason)
	}
	if r.lastRecords == 0 {
		// The segment lost even its header records: write them again so it
		// stays self-contained for metadata.
		if err := w.writeHeader(); err != nil {
			return nil, fmt.Errorf("wal: rewrite header of %s: %w", path, err)
		}
	}
	st := &State{HardState: r.hs, Snapshot: r.snap, Entries: r.ents}
	w.log.Debug("wal: opened", "dir", w.dir, "segments", len(w.segs), "entries", len(st.Entries))
	return st, nil
}

// create creates the first segment of an empty WAL.
func (w *WAL) create() (*State, error) {
	s := segment{}
	w.enc.reset(s.seq, 0)
	if err := w.encodeHeader(); err != nil {
		return nil, err
	}
	f, err := createSegment(w.dir, s, w.enc.buf)
	if err != nil {
		return nil, fmt.Errorf("wal: create segment %s: %w", filepath.Join(w.dir, s.name()), err)
	}
	w.f, w.off, w.segs = f, int64(len(w.enc.buf)), []segment{s}
	w.markers = []uint64{0}
	return &State{}, nil
}

// encodeHeader appends a segment's header records to w.enc: the newest
// snapshot marker and, if one was saved, the HardState.
func (w *WAL) encodeHeader() error {
	if err := w.enc.add(typeSnapshot, &w.snap); err != nil {
		return fmt.Errorf("wal: encode snapshot marker: %w", err)
	}
	if w.hs != (raftpb.HardState{}) {
		if err := w.enc.add(typeHardState, &w.hs); err != nil {
			return fmt.Errorf("wal: encode hard state: %w", err)
		}
	}
	return nil
}

// writeHeader writes the header records at the start of the (empty) active
// segment and syncs it.
func (w *WAL) writeHeader() error {
	w.enc.reset(w.active().seq, 0)
	if err := w.encodeHeader(); err != nil {
		return err
	}
	if _, err := w.f.WriteAt(w.enc.buf, 0); err != nil {
		return err
	}
	w.off = int64(len(w.enc.buf))
	return fdatasync(w.f)
}

func (w *WAL) active() segment { return w.segs[len(w.segs)-1] }

func (w *WAL) activePath() string { return filepath.Join(w.dir, w.active().name()) }

// writable returns why the WAL cannot be written, or nil.
func (w *WAL) writable() error {
	if w.closed {
		return ErrClosed
	}
	if w.failed != nil {
		return fmt.Errorf("%w (first failure: %v)", ErrFailed, w.failed)
	}
	return nil
}

// fail records a write failure; every later write returns ErrFailed.
func (w *WAL) fail(op string, err error) error {
	err = fmt.Errorf("wal: %s: %w", op, err)
	w.failed = err
	w.log.Error("wal: write failed; the WAL refuses further writes", "dir", w.dir, "err", err)
	return fmt.Errorf("%w; %w", err, ErrFailed)
}

// Save appends ents (in order) and then hs, unless hs is empty. With sync it
// returns after the records are durable (fdatasync). Nothing is written when
// hs is empty and ents is empty.
func (w *WAL) Save(hs raftpb.HardState, ents []raftpb.Entry, sync bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	hasHS := hs != (raftpb.HardState{})
	if !hasHS && len(ents) == 0 {
		return nil
	}
	tr := w.tr
	for i := range ents {
		if !tr.entryOK(ents[i].Index) {
			return fmt.Errorf("wal: save: entry index %d does not follow index %d (a gap in the log)",
				ents[i].Index, tr.last)
		}
		tr.entry(ents[i].Index)
	}
	if err := w.maybeCut(); err != nil {
		return err
	}
	w.enc.reset(w.active().seq, w.off)
	for i := range ents {
		if err := w.enc.add(typeEntry, &ents[i]); err != nil {
			return fmt.Errorf("wal: save entry %d: %w", ents[i].Index, err)
		}
	}
	if hasHS {
		w.hsTmp = hs // addressable without a heap allocation per Save
		if err := w.enc.add(typeHardState, &w.hsTmp); err != nil {
			return fmt.Errorf("wal: save hard state: %w", err)
		}
	}
	if sync {
		if err := w.padToPage(); err != nil {
			return err
		}
	}
	if err := w.write(); err != nil {
		return err
	}
	w.tr = tr
	if hasHS {
		w.hs = hs
	}
	if sync {
		return w.sync()
	}
	return nil
}

// SaveSnapshot appends a snapshot marker and syncs. Markers must not go
// backwards.
func (w *WAL) SaveSnapshot(meta raftpb.SnapshotMetadata) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	if meta.Index < w.snap.Index {
		return fmt.Errorf("wal: save snapshot marker: index %d is older than the newest marker at index %d",
			meta.Index, w.snap.Index)
	}
	if err := w.maybeCut(); err != nil {
		return err
	}
	w.enc.reset(w.active().seq, w.off)
	if err := w.enc.add(typeSnapshot, &meta); err != nil {
		return fmt.Errorf("wal: save snapshot marker: %w", err)
	}
	if err := w.padToPage(); err != nil {
		return err
	}
	if err := w.write(); err != nil {
		return err
	}
	w.snap = meta
	if n := len(w.markers); n == 0 || w.markers[n-1] != meta.Index {
		w.markers = append(w.markers, meta.Index)
	}
	w.tr.marker(meta.Index)
	return w.sync()
}

// padToPage ends the records in w.enc.buf, which are about to be written
// and synced, with a padding record up to the next page boundary, if that
// takes no more bytes than the sync flushes without it. The partly filled
// last page is then written once instead of again by the next synced
// write: about half a page less written per sync, for at most twice the
// file size when syncs flush little.
func (w *WAL) padToPage() error {
	end := w.off + int64(len(w.enc.buf))
	pad := -end & int64(w.page-1)
	if pad == 0 || pad > w.unsynced+int64(len(w.enc.buf)) {
		return nil
	}
	// pad is a multiple of 8, at least a record header: end is aligned.
	if err := w.enc.add(typePad, zeros(int(pad)-headerSize)); err != nil {
		return fmt.Errorf("wal: pad to the page boundary: %w", err)
	}
	return nil
}

// write writes w.enc.buf at the end of the active segment.
func (w *WAL) write() error {
	if _, err := w.f.WriteAt(w.enc.buf, w.off); err != nil {
		return w.fail("write segment "+w.activePath(), err)
	}
	w.off += int64(len(w.enc.buf))
	w.unsynced += int64(len(w.enc.buf))
	return nil
}

func (w *WAL) sync() error {
	if err := fdatasync(w.f); err != nil {
		return w.fail("sync segment "+w.activePath(), err)
	}
	w.unsynced = 0
	return nil
}

// maybeCut starts a new segment if the active one is full or sealed.
func (w *WAL) maybeCut() error {
	if !w.sealed && w.off < w.opts.SegmentSize {
		return nil
	}
	// Seal and sync the old segment first: once a newer segment exists, a
	// damaged old one is corruption, not a torn tail.
	if !w.sealed {
		w.enc.reset(w.active().seq, w.off)
		if err := w.enc.add(typeSeal, nil); err != nil {
			return w.fail("seal segment "+w.activePath(), err)
		}
		if err := w.write(); err != nil {
			return err
		}
		w.sealed = true
	}
	if err := w.sync(); err != nil {
		return err
	}
	next := segment{seq: w.active().seq + 1, first: w.tr.nextFirst()}
	w.enc.reset(next.seq, 0)
	if err := w.encodeHeader(); err != nil {
		return w.fail("cut segment", err)
	}
	f, err := createSegment(w.dir, next, w.enc.buf)
	if err != nil {
		return w.fail("create segment "+filepath.Join(w.dir, next.name()), err)
	}
	if err := w.f.Close(); err != nil {
		w.log.Warn("wal: close old segment", "file", w.activePath(), "err", err)
	}
	w.f, w.off, w.sealed, w.unsynced = f, int64(len(w.enc.buf)), false, 0
	w.segs = append(w.segs, next)
	if n := len(w.markers); n == 0 || w.markers[n-1] != w.snap.Index {
		w.markers = append(w.markers, w.snap.Index)
	}
	w.log.Debug("wal: cut segment", "file", filepath.Join(w.dir, next.name()))
	return nil
}

// ReleaseTo removes the oldest segments that are not needed to replay the
// log from the newest snapshot marker whose index is <= index. The active
// segment is never removed.
func (w *WAL) ReleaseTo(index uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	// Newest marker <= index.
	k := sort.Search(len(w.markers), func(i int) bool { return w.markers[i] > index })
	if k == 0 {
		return nil
	}
	m := w.markers[k-1]
	// The newest segment whose first entry is <= m+1 holds (or precedes)
	// every live entry after m; the segments before it are not needed.
	keep := 0
	for i, s := range w.segs {
		if s.first <= m || s.first == m+1 {
			keep = i
		}
	}
	if keep == 0 {
		return nil
	}
	removed := 0
	var rerr error
	for _, s := range w.segs[:keep] {
		path := filepath.Join(w.dir, s.name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			rerr = fmt.Errorf("wal: release: remove %s: %w", path, err)
			break
		}
		removed++
	}
	w.segs = append([]segment(nil), w.segs[removed:]...)
	w.markers = append([]uint64(nil), w.markers[k-1:]...)
	if removed > 0 {
		if err := atomicfile.SyncDir(w.dir); err != nil && rerr == nil {
			rerr = fmt.Errorf("wal: release: sync directory %s: %w", w.dir, err)
		}
		w.log.Debug("wal: released segments", "dir", w.dir, "removed", removed, "snapshot_index", m)
	}
	return rerr
}

// Close syncs unsynced writes (unless a write failed) and closes the WAL,
// releasing the directory lock.
func (w *WAL) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if w.failed == nil && w.unsynced > 0 {
		if err := fdatasync(w.f); err != nil {
			errs = append(errs, fmt.Errorf("wal: close: sync %s: %w", w.activePath(), err))
		}
	}
	if err := w.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("wal: close %s: %w", w.activePath(), err))
	}
	if err := w.dirFile.Close(); err != nil {
		errs = append(errs, fmt.Errorf("wal: close directory %s: %w", w.dir, err))
	}
	return errors.Join(errs...)
}
