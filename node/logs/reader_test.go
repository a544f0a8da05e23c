package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// at is the timestamp of second n in the test files, as the kubelet shows it.
func at(n int) time.Time { return epoch.Add(time.Duration(n)*time.Second + 5*time.Millisecond) }

func rec(n int, stream, tag, content string) string {
	return at(n).Format(timeFormat) + " " + stream + " " + tag + " " + content + "\n"
}

func writeLog(t *testing.T, path string, records ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(records, "")), 0o640); err != nil {
		t.Fatal(err)
	}
}

// logBuffer is a slog handler's output that tests read.
func testLogger() (*slog.Logger, *syncBuffer) {
	var b syncBuffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeLog(t, path,
		rec(1, "stdout", "F", "one"),
		rec(2, "stderr", "F", "two"),
		rec(3, "stdout", "P", "thr"),
		rec(4, "stdout", "F:future-tag", "ee"),
		"not a log line\n",
		rec(5, "stderr", "F", "four"),
		rec(6, "stdout", "P", "five"))
	ts := func(n int) string { return at(n).Format(time.RFC3339Nano) + " " }
	tests := []struct {
		name string
		opt  ReadOptions
		want string
	}{
		{"all", ReadOptions{TailLines: -1}, "one\ntwo\nthree\nfour\nfive"},
		{"timestamps", ReadOptions{TailLines: -1, Timestamps: true},
			ts(1) + "one\n" + ts(2) + "two\n" + ts(3) + "three\n" + ts(5) + "four\n" + ts(6) + "five"},
		{"stdout", ReadOptions{TailLines: -1, Stream: Stdout}, "one\nthree\nfive"},
		{"stderr", ReadOptions{TailLines: -1, Stream: Stderr}, "two\nfour\n"},
		{"tail 2", ReadOptions{TailLines: 2}, "four\nfive"},
		{"tail 3", ReadOptions{TailLines: 3}, "three\nfour\nfive"},
		{"tail 2 stdout", ReadOptions{TailLines: 2, Stream: Stdout}, "three\nfive"},
		{"tail 0", ReadOptions{TailLines: 0}, ""},
		{"tail more than all", ReadOptions{TailLines: 100}, "one\ntwo\nthree\nfour\nfive"},
		{"since a line's first part", ReadOptions{TailLines: -1, Since: at(3)}, "three\nfour\nfive"},
		{"since a line's last part", ReadOptions{TailLines: -1, Since: at(4)}, "four\nfive"},
		{"since and tail", ReadOptions{TailLines: 1, Since: at(2)}, "five"},
		{"since after all", ReadOptions{TailLines: -1, Since: at(7)}, ""},
		{"limit bytes", ReadOptions{TailLines: -1, LimitBytes: 6}, "one\ntw"},
		{"limit bytes exact", ReadOptions{TailLines: -1, LimitBytes: 4}, "one\n"},
		{"limit bytes with timestamps", ReadOptions{TailLines: -1, LimitBytes: 10, Timestamps: true}, ts(1)[:10]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log, logged := testLogger()
			tc.opt.Logger = log
			var out bytes.Buffer
			if err := Read(t.Context(), path, tc.opt, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("output %q, want %q", out.String(), tc.want)
			}
			if tc.opt.LimitBytes > 0 {
				return // stopped before the corrupt line
			}
			if !strings.Contains(logged.String(), "count=1") || !strings.Contains(logged.String(), "0.log at byte") {
				t.Errorf("corrupt line not reported once with its place: %q", logged.String())
			}
		})
	}
}

func TestReadCorruptLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeLog(t, rotatedName(path, 1),
		rec(1, "stdout", "F", "old"),
		strings.Repeat("x", 2*readBufSize)+"\n", // too long for the reader
		rec(2, "stdout", "F", "after long"),
		strings.TrimSuffix(rec(3, "stdout", "F", "cut by a crash"), "\n")) // no newline in a rotated file
	writeLog(t, path,
		"\n",
		"2024-13-01T00:00:00Z stdout F bad month\n",
		rec(4, "stdin", "F", "bad stream"),
		rec(5, "stdout", "X", "bad tag"),
		at(6).Format(timeFormat)+" stdout F\n", // no space after the tag
		rec(7, "stdout", "F", "new"),
		strings.TrimSuffix(rec(8, "stdout", "F", "still being written"), "\n"))
	log, logged := testLogger()
	var out bytes.Buffer
	if err := Read(t.Context(), path, ReadOptions{TailLines: -1, Logger: log}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "old\nafter long\nnew\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	// The long line, the unterminated one of the rotated file, and the five
	// bad lines; not the current file's last line, which is being written.
	if !strings.Contains(logged.String(), "count=7") || !strings.Contains(logged.String(), "0.log.1 at byte") {
		t.Errorf("warning %q: want count=7 and the first place", logged.String())
	}
}

func TestReadAcrossRotatedFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	// Each file holds about one full record.
	w := newTestWriter(t, path, MaxLineSize, 10)
	long := strings.Repeat("0123456789", 5000) // four records, over four files
	write(t, w, Stdout, "first\n", long+"\n", "a\n")
	write(t, w, Stderr, strings.Repeat("e", MaxLineSize), "\n")
	write(t, w, Stdout, "b\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rotatedName(path, 5)); err != nil {
		t.Fatalf("want at least 6 files: %v", err)
	}
	tests := []struct {
		name string
		opt  ReadOptions
		want string
	}{
		{"all", ReadOptions{TailLines: -1}, "first\n" + long + "\na\n" + strings.Repeat("e", MaxLineSize) + "\nb\n"},
		{"tail 4", ReadOptions{TailLines: 4}, long + "\na\n" + strings.Repeat("e", MaxLineSize) + "\nb\n"},
		{"tail 2 stdout", ReadOptions{TailLines: 2, Stream: Stdout}, "a\nb\n"},
		{"limit in a joined line", ReadOptions{TailLines: 4, LimitBytes: 20}, long[:20]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Read(t.Context(), path, tc.opt, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("output (%d bytes) %.80q..., want (%d bytes) %.80q...", out.Len(), out.String(), len(tc.want), tc.want)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeLog(t, path, rec(1, "stdout", "F", "x"))
	tests := []struct {
		name string
		path string
		opt  ReadOptions
		want string
	}{
		{"missing", filepath.Join(dir, "none.log"), ReadOptions{TailLines: -1}, "no such file"},
		{"bad stream", path, ReadOptions{TailLines: -1, Stream: "stdin"}, `stream "stdin"`},
		{"bad tail", path, ReadOptions{TailLines: -2}, "tail lines -2"},
		{"bad limit", path, ReadOptions{TailLines: -1, LimitBytes: -1}, "limit bytes -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Read(t.Context(), tc.path, tc.opt, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	err := Read(t.Context(), filepath.Join(dir, "none.log"), ReadOptions{}, &bytes.Buffer{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v is not fs.ErrNotExist", err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type follower struct {
	out     syncBuffer
	running atomic.Bool
	done    chan error
}

// startFollow starts a following Read and returns once it has shown the
// lines there were and follows.
func startFollow(t *testing.T, ctx context.Context, path string, opt ReadOptions) *follower {
	t.Helper()
	f := &follower{done: make(chan error, 1)}
	f.running.Store(true)
	following := make(chan struct{})
	var once sync.Once
	opt.Follow = true
	opt.Running = func() bool {
		once.Do(func() { close(following) })
		return f.running.Load()
	}
	go func() { f.done <- Read(ctx, path, opt, &f.out) }()
	select {
	case <-following:
	case err := <-f.done:
		t.Fatalf("follow ended at once: %v", err)
	}
	return f
}

func (f *follower) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end")
		return nil
	}
}

func TestReadFollowAcrossRotation(t *testing.T) {
	for _, maxFiles := range []int{1, 3} {
		t.Run(fmt.Sprint("maxFiles=", maxFiles), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			recLen := len(rec(1, "stdout", "F", "line 00"))
			w := newTestWriter(t, path, int64(4*recLen), maxFiles)
			write(t, w, Stdout, "line 00\nline 01\nline 02\n")
			f := startFollow(t, t.Context(), path, ReadOptions{TailLines: 2})
			var want strings.Builder
			want.WriteString("line 01\nline 02\n")
			waitFor(t, "the tail", func() bool { return f.out.String() == want.String() })
			// Each batch rotates the file once at most, so the follower
			// misses none of them.
			for i := 3; i < 14; i += 2 {
				batch := fmt.Sprintf("line %02d\nline %02d\n", i, i+1)
				write(t, w, Stdout, batch)
				want.WriteString(batch)
				waitFor(t, "line "+fmt.Sprint(i+1), func() bool { return f.out.String() == want.String() })
			}
			write(t, w, Stdout, "last words")
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f.running.Store(false)
			if err := f.wait(t); err != nil {
				t.Fatal(err)
			}
			if got, want := f.out.String(), want.String()+"last words"; got != want {
				t.Errorf("followed %q, want %q", got, want)
			}
		})
	}
}

func TestReadFollowEndsWhenStopped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, path, 1<<20, 1)
	write(t, w, Stderr, "old\n")
	f := startFollow(t, t.Context(), path, ReadOptions{TailLines: 0, Timestamps: true})
	write(t, w, Stderr, "new\n")
	waitFor(t, "the new line", func() bool { return strings.HasSuffix(f.out.String(), " new\n") })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.running.Store(false)
	if err := f.wait(t); err != nil {
		t.Fatal(err)
	}
	// The writer's clock gave the second record this time.
	stamp := epoch.Add(2 * (time.Second + time.Nanosecond)).Format(time.RFC3339Nano)
	if got, want := f.out.String(), stamp+" new\n"; got != want {
		t.Errorf("followed %q, want %q", got, want)
	}
}

func TestReadFollowCanceled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeLog(t, path, rec(1, "stdout", "F", "x"))
	ctx, cancel := context.WithCancel(t.Context())
	f := startFollow(t, ctx, path, ReadOptions{TailLines: -1})
	waitFor(t, "the line", func() bool { return f.out.String() == "x\n" })
	cancel()
	if err := f.wait(t); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestReadFollowLimitBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, path, 1<<20, 1)
	f := startFollow(t, t.Context(), path, ReadOptions{TailLines: -1, LimitBytes: 8})
	write(t, w, Stdout, "abcd\n")
	write(t, w, Stdout, "efgh\n")
	if err := f.wait(t); err != nil {
		t.Fatal(err)
	}
	if got := f.out.String(); got != "abcd\nefg" {
		t.Errorf("followed %q, want the first 8 bytes", got)
	}
}
