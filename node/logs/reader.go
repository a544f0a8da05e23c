package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"
)

// pollInterval is how often a follower looks for new lines, for a rotation
// and for whether the container still runs.
const pollInterval = 250 * time.Millisecond

// readBufSize holds any record this package writes (MaxLineSize and a
// header) with room to spare; a longer line is corrupt and skipped.
const readBufSize = 32 * 1024

// readOutSize is the buffer between Read and its writer: a follower flushes it
// whenever it has caught up with the file.
const readOutSize = 4 * 1024

// ReadOptions says what Read shows, as kubectl logs' flags do. The zero value
// shows no line (TailLines 0): set TailLines to -1 for all.
type ReadOptions struct {
	// Follow keeps reading new lines (across rotations) until Running
	// returns false and the file has been read to its end, or ctx ends.
	Follow bool
	// TailLines shows only the last lines (joined lines, counted after the
	// Since and Stream filters); -1 shows all.
	TailLines int64
	// Since skips the lines written before it; zero: none skipped.
	Since time.Time
	// Timestamps puts each line's timestamp (RFC 3339) and a space before it.
	Timestamps bool
	// LimitBytes ends the output after that many bytes (which may cut a
	// line); 0: no limit.
	LimitBytes int64
	// Stream is "stdout" or "stderr" to show one stream only; "": both.
	Stream string
	// Running reports whether the container still runs. It must turn false
	// only once the container's Writer is closed, or the last lines may be
	// missed. nil: not running (Follow ends at the end of the file).
	Running func() bool
	// Logger gets one warning per Read that skipped corrupt lines, with
	// their count and the first one's place; nil: slog.Default().
	Logger *slog.Logger
}

func (o *ReadOptions) validate() ([numStreams]bool, error) {
	var want [numStreams]bool
	switch o.Stream {
	case "":
		want = [numStreams]bool{true, true}
	case Stdout:
		want[stdoutID] = true
	case Stderr:
		want[stderrID] = true
	default:
		return want, fmt.Errorf("stream %q: want stdout, stderr or empty for both", o.Stream)
	}
	if o.TailLines < -1 {
		return want, fmt.Errorf("tail lines %d: want -1 (all) or >= 0", o.TailLines)
	}
	if o.LimitBytes < 0 {
		return want, fmt.Errorf("limit bytes %d: want >= 0 (0: no limit)", o.LimitBytes)
	}
	return want, nil
}

// Read writes the log at path, with its rotated predecessors (path.N down to
// path.1, oldest first), to w as kubectl logs shows it: the content of each
// line, or "<timestamp> <content>" with Timestamps. The parts of a split
// line are joined, with the first part's timestamp; a last line with no
// newline is written without one. Parts of lines of both streams that
// interleave in the file interleave in the output, as with the kubelet.
//
// With Follow, Read keeps showing new lines, and goes on in the new file
// when the log is rotated under it, until Running reports false (and the
// file has been read to its end) or ctx ends (then it returns ctx's error).
// A corrupt line is skipped, counted and reported once to opt.Logger.
func Read(ctx context.Context, path string, opt ReadOptions, w io.Writer) error {
	want, err := opt.validate()
	if err != nil {
		return fmt.Errorf("logs: read %s: %w", path, err)
	}
	files, err := openLog(path)
	if err != nil {
		return err
	}
	r := &reader{
		opt:   opt,
		want:  want,
		path:  path,
		files: files,
		buf:   make([]byte, readBufSize),
		out:   bufio.NewWriterSize(w, readOutSize),
	}
	r.dst = &limitWriter{w: r.out, n: -1}
	if opt.LimitBytes > 0 {
		r.dst.n = opt.LimitBytes
	}
	defer func() {
		for _, f := range r.files {
			f.Close()
		}
	}()
	err = r.run(ctx)
	if errors.Is(err, errLimit) {
		err = nil
	}
	if ferr := r.out.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("logs: read %s: write: %w", path, ferr)
	}
	if r.corrupt > 0 {
		log := opt.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("logs: skipped corrupt lines", "path", path, "count", r.corrupt, "first", r.firstCorrupt)
	}
	return err
}

// openLog opens the log at path and its rotated files, oldest first. A file
// met twice (renamed by a rotation while opening) is opened once.
func openLog(path string) ([]*os.File, error) {
	var files []*os.File
	var infos []fs.FileInfo
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for k := 0; ; k++ {
		name := path
		if k > 0 {
			name = rotatedName(path, k)
		}
		f, err := os.Open(name)
		if k > 0 && errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("logs: read: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			closeAll()
			return nil, fmt.Errorf("logs: read: %w", err)
		}
		if seen(infos, fi) {
			f.Close()
			continue
		}
		files, infos = append(files, f), append(infos, fi)
	}
	for i, j := 0, len(files)-1; i < j; i, j = i+1, j-1 {
		files[i], files[j] = files[j], files[i]
	}
	return files, nil
}

func seen(infos []fs.FileInfo, fi fs.FileInfo) bool {
	for _, o := range infos {
		if os.SameFile(o, fi) {
			return true
		}
	}
	return false
}

// reader is one Read: a line reader over the current file and the decoder of
// the records into the output.
type reader struct {
	opt   ReadOptions
	want  [numStreams]bool
	path  string
	files []*os.File // oldest first; a follower appends the files it moves to

	// The current file and its line buffer: buf[r:w] is read but not used;
	// pos is the file offset of buf[r]; long is set while skipping the rest
	// of a line longer than buf.
	f    *os.File
	buf  []byte
	r, w int
	pos  int64
	long bool

	// Decoding: a line starts at a stream's record when the stream's last
	// record was not partial (open); its first record decides whether the
	// whole line is dropped (Since, TailLines). lines counts the lines shown
	// or skipped for TailLines; output is false while counting them.
	output bool
	skip   int64
	lines  int64
	open   [numStreams]bool
	drop   [numStreams]bool
	ts     []byte

	corrupt      int64
	firstCorrupt string

	out *bufio.Writer
	dst *limitWriter
}

func (r *reader) run(ctx context.Context) error {
	if r.opt.TailLines >= 0 {
		// Count the lines, then show from the right one on. This reads the
		// files twice; reading backwards from the end would read less, but
		// could not tell where a line begins whose parts interleave with
		// the other stream's, nor apply Since and Stream as the output does.
		for _, f := range r.files {
			if err := r.readFile(ctx, f, f != r.files[len(r.files)-1]); err != nil {
				return err
			}
		}
		r.skip = max(0, r.lines-r.opt.TailLines)
		for _, f := range r.files {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("logs: read %s: %w", r.path, err)
			}
		}
		r.lines, r.open, r.drop, r.corrupt, r.firstCorrupt = 0, [numStreams]bool{}, [numStreams]bool{}, 0, ""
	}
	r.output = true
	last := len(r.files) - 1
	for _, f := range r.files[:last] {
		if err := r.readFile(ctx, f, true); err != nil {
			return err
		}
	}
	if !r.opt.Follow {
		return r.readFile(ctx, r.files[last], false)
	}
	r.setFile(r.files[last])
	return r.follow(ctx)
}

// readFile reads f to its current end. In a rotated file, which no longer
// grows, an unterminated last line is corrupt; in the current file it is a
// record still being written.
func (r *reader) readFile(ctx context.Context, f *os.File, rotated bool) error {
	r.setFile(f)
	if err := r.drain(ctx); err != nil {
		return err
	}
	if rotated {
		r.endFile()
	}
	return nil
}

func (r *reader) follow(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		// Ask first: lines written before the container stopped are then
		// read by the drain below.
		running := r.opt.Running != nil && r.opt.Running()
		if err := r.drain(ctx); err != nil {
			return err
		}
		next, err := r.rotated()
		if err != nil {
			return err
		}
		if next != nil {
			// Lines written to the old file before its rename.
			if err := r.drain(ctx); err != nil {
				next.Close()
				return err
			}
			r.endFile()
			r.files = append(r.files, next)
			r.setFile(next)
			continue
		}
		if !running {
			return nil
		}
		if err := r.out.Flush(); err != nil {
			return fmt.Errorf("logs: read %s: write: %w", r.path, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// rotated opens the file now at the log's path if it is not the one being
// read; nil if it is, or if there is none yet (a rotation under way).
func (r *reader) rotated() (*os.File, error) {
	fi, err := os.Stat(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logs: follow: %w", err)
	}
	cur, err := r.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("logs: follow %s: %w", r.path, err)
	}
	if os.SameFile(fi, cur) {
		return nil, nil
	}
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logs: follow: %w", err)
	}
	return f, nil
}

func (r *reader) setFile(f *os.File) {
	r.f, r.r, r.w, r.pos, r.long = f, 0, 0, 0, false
}

// endFile counts an unterminated last line of a file that no longer grows.
func (r *reader) endFile() {
	if r.w > r.r && !r.long {
		r.corruptLine(r.pos, errors.New("no newline at end of file"))
	}
	r.r, r.w = 0, 0
}

// drain decodes the records of the current file up to its current end.
func (r *reader) drain(ctx context.Context) error {
	for {
		line, off, ok, err := r.nextLine(ctx)
		if err != nil || !ok {
			return err
		}
		rec, err := parseRecord(line)
		if err != nil {
			r.corruptLine(off, err)
			continue
		}
		if err := r.handle(rec); err != nil {
			return err
		}
	}
}

// nextLine returns the next complete line of the current file (without its
// newline) and its offset, or ok false at the file's current end, keeping an
// incomplete line for the next call. A line longer than the buffer is
// counted as corrupt and skipped.
func (r *reader) nextLine(ctx context.Context) (line []byte, off int64, ok bool, err error) {
	for {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			line, off = r.buf[r.r:r.r+i], r.pos
			r.r += i + 1
			r.pos += int64(i + 1)
			if r.long {
				r.long = false
				continue
			}
			return line, off, true, nil
		}
		if r.r > 0 {
			r.w = copy(r.buf, r.buf[r.r:r.w])
			r.r = 0
		}
		if r.w == len(r.buf) {
			if !r.long {
				r.corruptLine(r.pos, fmt.Errorf("line longer than %d bytes", len(r.buf)))
				r.long = true
			}
			r.pos += int64(r.w)
			r.w = 0
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, false, err
		}
		n, err := r.f.Read(r.buf[r.w:])
		r.w += n
		if n == 0 {
			if err == nil || err == io.EOF {
				return nil, 0, false, nil
			}
			return nil, 0, false, fmt.Errorf("logs: read %s: %w", r.f.Name(), err)
		}
	}
}

func (r *reader) corruptLine(off int64, err error) {
	if r.corrupt == 0 {
		r.firstCorrupt = fmt.Sprintf("%s at byte %d: %v", r.f.Name(), off, err)
	}
	r.corrupt++
}

// handle shows one record, or counts it while output is off.
func (r *reader) handle(rec record) error {
	id := rec.stream
	if !r.want[id] {
		return nil
	}
	if !r.open[id] {
		r.drop[id] = !r.opt.Since.IsZero() && rec.time.Before(r.opt.Since)
		if !r.drop[id] {
			r.drop[id] = r.lines < r.skip
			r.lines++
		}
		if !r.drop[id] && r.output && r.opt.Timestamps {
			r.ts = append(rec.time.AppendFormat(r.ts[:0], time.RFC3339Nano), ' ')
			if _, err := r.dst.Write(r.ts); err != nil {
				return r.writeErr(err)
			}
		}
	}
	r.open[id] = rec.partial
	if r.drop[id] || !r.output {
		return nil
	}
	if _, err := r.dst.Write(rec.content); err != nil {
		return r.writeErr(err)
	}
	if !rec.partial {
		if _, err := r.dst.Write([]byte{'\n'}); err != nil {
			return r.writeErr(err)
		}
	}
	return nil
}

func (r *reader) writeErr(err error) error {
	if errors.Is(err, errLimit) {
		return err
	}
	return fmt.Errorf("logs: read %s: write: %w", r.path, err)
}

// errLimit ends a Read that has written LimitBytes.
var errLimit = errors.New("byte limit reached")

// limitWriter passes at most n bytes on (n < 0: no limit), then fails with
// errLimit.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n < 0 {
		return l.w.Write(p)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.w.Write(p)
	l.n -= int64(n)
	if err == nil && l.n == 0 {
		err = errLimit
	}
	return n, err
}
