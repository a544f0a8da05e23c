package logs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// outBufSize is the size of the buffers that gather the records of one
// Write before they go to the file in one system call. They are pooled, so
// memory grows with the writes in flight, not with the number of containers.
const outBufSize = 32 * 1024

var outBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, outBufSize)
	return &b
}}

// keepPending is the largest pending-line buffer a stream keeps between
// lines; a bigger one (from a long line) is given back to the garbage
// collector once its line is written.
const keepPending = 1024

// Writer writes one container's log file (one file per container start,
// path chosen by the caller, e.g. <pod log dir>/<container>/<restartCount>.log),
// rotating it by size: when a record would make the file exceed maxSize, the
// file is renamed to path.1 (path.1 to path.2 and so on) and a new one begun,
// keeping at most maxFiles files in all. It never calls fsync (SD cards).
//
// Each stream keeps the start of a line that has no newline yet (at most
// MaxLineSize bytes) until the line ends, as containerd does.
type Writer struct {
	path     string
	maxSize  int64
	maxFiles int
	now      func() time.Time
	streams  [numStreams]streamWriter

	mu      sync.Mutex
	f       *os.File // nil after a failed rotation, reopened by the next write
	size    int64    // bytes of the current file, buffered ones included
	pending [numStreams][]byte
	closed  bool
}

// NewWriter opens (creating it if need be, appending if it exists) the log
// file at path. maxSize (bytes, > 0) and maxFiles (>= 1) bound the rotation;
// now gives the records' timestamps (nil: time.Now).
func NewWriter(path string, maxSize int64, maxFiles int, now func() time.Time) (*Writer, error) {
	switch {
	case path == "":
		return nil, errors.New("logs: new writer: empty path")
	case maxSize <= 0:
		return nil, fmt.Errorf("logs: new writer %s: maxSize %d: must be > 0", path, maxSize)
	case maxFiles < 1:
		return nil, fmt.Errorf("logs: new writer %s: maxFiles %d: must be >= 1", path, maxFiles)
	}
	if now == nil {
		now = time.Now
	}
	w := &Writer{path: path, maxSize: maxSize, maxFiles: maxFiles, now: now}
	for i := range w.streams {
		w.streams[i] = streamWriter{w: w, id: streamID(i)}
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

// Stream returns the writer of the stream name, "stdout" or "stderr". The two
// streams' writers may be used concurrently; each record is written whole.
// A write error (a full disk) is returned; the caller should keep draining
// the container's output so that the container does not block.
func (w *Writer) Stream(name string) io.Writer {
	switch name {
	case Stdout:
		return &w.streams[stdoutID]
	case Stderr:
		return &w.streams[stderrID]
	}
	panic(fmt.Sprintf("logs: Stream(%q): want stdout or stderr", name))
}

// Close writes the lines still pending (as P records, like containerd when
// a container's output ends without a newline) and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	out := outBufs.Get().(*[]byte)
	defer putOut(out)
	var err error
	for id := range w.pending {
		if len(w.pending[id]) > 0 {
			err = errors.Join(err, w.emit(out, streamID(id), tagPartial, w.pending[id], nil))
			w.pending[id] = nil
		}
	}
	err = errors.Join(err, w.flush(out))
	if w.f != nil {
		if cerr := w.f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("logs: close %s: %w", w.path, cerr))
		}
		w.f = nil
	}
	return err
}

type streamWriter struct {
	w  *Writer
	id streamID
}

func (s *streamWriter) Write(p []byte) (int, error) {
	return s.w.write(s.id, p)
}

// write splits p into records: every newline ends an F record, and a line
// growing past MaxLineSize is cut into P records.
func (w *Writer) write(id streamID, p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, fmt.Errorf("logs: write %s: %w", w.path, os.ErrClosed)
	}
	out := outBufs.Get().(*[]byte)
	defer putOut(out)
	n := len(p)
	for len(p) > 0 {
		seg, rest, full := bytes.Cut(p, []byte{'\n'})
		p = rest
		for len(w.pending[id])+len(seg) > MaxLineSize {
			room := MaxLineSize - len(w.pending[id])
			if err := w.emit(out, id, tagPartial, w.pending[id], seg[:room]); err != nil {
				return 0, err
			}
			w.pending[id] = w.pending[id][:0]
			seg = seg[room:]
		}
		if !full {
			w.pending[id] = append(w.pending[id], seg...)
			break
		}
		if err := w.emit(out, id, tagFull, w.pending[id], seg); err != nil {
			return 0, err
		}
		w.pending[id] = w.pending[id][:0]
		if cap(w.pending[id]) > keepPending {
			w.pending[id] = nil
		}
	}
	if err := w.flush(out); err != nil {
		return 0, err
	}
	return n, nil
}

// emit adds one record to out, rotating the file first if the record would
// make it exceed maxSize (a record bigger than maxSize gets a file alone).
func (w *Writer) emit(out *[]byte, id streamID, tag byte, a, b []byte) error {
	n := recordLen(id, len(a)+len(b))
	if w.size > 0 && w.size+int64(n) > w.maxSize {
		if err := w.flush(out); err != nil {
			return err
		}
		if err := w.rotate(); err != nil {
			return err
		}
	}
	if len(*out)+n > cap(*out) {
		if err := w.flush(out); err != nil {
			return err
		}
	}
	*out = appendRecord(*out, w.now(), id, tag, a, b)
	w.size += int64(n)
	return nil
}

// flush writes out to the file and empties it. Bytes that could not be
// written are dropped (and no longer counted in the file's size).
func (w *Writer) flush(out *[]byte) error {
	if len(*out) == 0 {
		return nil
	}
	defer func() { *out = (*out)[:0] }()
	if w.f == nil {
		if err := w.open(); err != nil {
			w.size = 0
			return err
		}
		w.size += int64(len(*out))
	}
	n, err := w.f.Write(*out)
	if err != nil {
		w.size -= int64(len(*out) - n)
		return fmt.Errorf("logs: write %s: %w", w.path, err)
	}
	return nil
}

// open opens the file at w.path for appending and learns its size.
func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("logs: open %s: %w", w.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("logs: open %s: %w", w.path, err)
	}
	w.f, w.size = f, fi.Size()
	return nil
}

// rotate closes the file, shifts path.N to path.N+1 (dropping the oldest so
// that maxFiles remain), renames the file to path.1 and opens a new one.
func (w *Writer) rotate() error {
	err := w.f.Close()
	w.f, w.size = nil, 0
	if err != nil {
		return fmt.Errorf("logs: rotate %s: %w", w.path, err)
	}
	if w.maxFiles == 1 {
		if err := os.Remove(w.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("logs: rotate %s: %w", w.path, err)
		}
		return w.open()
	}
	oldest := rotatedName(w.path, w.maxFiles-1)
	if err := os.Remove(oldest); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logs: rotate %s: %w", w.path, err)
	}
	for k := w.maxFiles - 2; k >= 1; k-- {
		err := os.Rename(rotatedName(w.path, k), rotatedName(w.path, k+1))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("logs: rotate %s: %w", w.path, err)
		}
	}
	if err := os.Rename(w.path, rotatedName(w.path, 1)); err != nil {
		return fmt.Errorf("logs: rotate %s: %w", w.path, err)
	}
	return w.open()
}

// rotatedName is the name of the k-th older file of the log at path.
func rotatedName(path string, k int) string {
	return path + "." + strconv.Itoa(k)
}

func putOut(out *[]byte) {
	*out = (*out)[:0]
	outBufs.Put(out)
}
