package logs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// stepClock returns a clock that advances by one second (and one
// nanosecond, so fractions show) at each call.
func stepClock() func() time.Time {
	var mu sync.Mutex
	n := 0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		return epoch.Add(time.Duration(n) * (time.Second + time.Nanosecond))
	}
}

func ts(n int) string {
	return epoch.Add(time.Duration(n) * (time.Second + time.Nanosecond)).Format(timeFormat)
}

func newTestWriter(t *testing.T, path string, maxSize int64, maxFiles int) *Writer {
	t.Helper()
	w, err := NewWriter(path, maxSize, maxFiles, stepClock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func write(t *testing.T, w *Writer, stream string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		n, err := w.Stream(stream).Write([]byte(p))
		if err != nil || n != len(p) {
			t.Fatalf("write %q to %s: n=%d err=%v", p, stream, n, err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriterFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, path, 1<<20, 2)
	write(t, w, Stdout, "hel", "lo\nwor")
	write(t, w, Stderr, "oops\n\n")
	write(t, w, Stdout, "ld\nlast")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := ts(1) + " stdout F hello\n" +
		ts(2) + " stderr F oops\n" +
		ts(3) + " stderr F \n" +
		ts(4) + " stdout F world\n" +
		ts(5) + " stdout P last\n"
	if got := readFile(t, path); got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	if _, err := w.Stream(Stdout).Write([]byte("x\n")); err == nil {
		t.Error("write after Close: no error")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestWriterLongLines(t *testing.T) {
	a := strings.Repeat("a", MaxLineSize)
	tests := []struct {
		name  string
		parts []string
		want  []string // tag and content length of each record
	}{
		{"exactly max", []string{a + "\n"}, []string{"F16384"}},
		{"exactly max then newline", []string{a, "\n"}, []string{"F16384"}},
		{"one more than max", []string{a + "b\n"}, []string{"P16384", "F1"}},
		{"two and a half", []string{a + a, a[:5] + "\nx\n"}, []string{"P16384", "P16384", "F5", "F1"}},
		{"in small writes", []string{a[:10000], a[:10000], "\n"}, []string{"P16384", "F3616"}},
		{"unterminated", []string{a + "tail"}, []string{"P16384", "P4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			w := newTestWriter(t, path, 1<<20, 1)
			write(t, w, Stdout, tc.parts...)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.SplitAfter(readFile(t, path), "\n") {
				if line == "" {
					continue
				}
				rec, err := parseRecord([]byte(strings.TrimSuffix(line, "\n")))
				if err != nil {
					t.Fatalf("record %q: %v", line, err)
				}
				tag := "F"
				if rec.partial {
					tag = "P"
				}
				got = append(got, fmt.Sprintf("%s%d", tag, len(rec.content)))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("records %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWriterRotation(t *testing.T) {
	recLen := int64(len(ts(1) + " stdout F line 00\n"))
	for _, maxFiles := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("maxFiles=", maxFiles), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "0.log")
			maxSize := 3*recLen + 5 // three records a file
			w := newTestWriter(t, path, maxSize, maxFiles)
			for i := range 20 {
				write(t, w, Stdout, fmt.Sprintf("line %02d\n", i))
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != maxFiles {
				t.Errorf("%d files, want %d", len(entries), maxFiles)
			}
			// Oldest first, the files hold consecutive lines ending with 19;
			// all but the current one are full.
			var all []string
			for k := maxFiles - 1; k >= 0; k-- {
				name := path
				if k > 0 {
					name = rotatedName(path, k)
				}
				content := readFile(t, name)
				if int64(len(content)) > maxSize {
					t.Errorf("%s: %d bytes > max %d", name, len(content), maxSize)
				}
				lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
				if k > 0 && len(lines) != 3 {
					t.Errorf("%s: %d records, want 3", name, len(lines))
				}
				for _, l := range lines {
					all = append(all, l[strings.LastIndexByte(l, ' ')+1:])
				}
			}
			for i, n := range all {
				if want := fmt.Sprintf("%02d", 20-len(all)+i); n != want {
					t.Fatalf("lines %v: not consecutive up to 19", all)
				}
			}
		})
	}
}

func TestWriterAppendsToExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	old := ts(0) + " stdout F before restart\n"
	if err := os.WriteFile(path, []byte(old), 0o640); err != nil {
		t.Fatal(err)
	}
	// Room for the old record and one more: the third record rotates.
	w := newTestWriter(t, path, int64(2*len(old)), 2)
	write(t, w, Stdout, "before restarT\n", "next\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, rotatedName(path, 1)), old+ts(1)+" stdout F before restarT\n"; got != want {
		t.Errorf("rotated file:\n%s\nwant:\n%s", got, want)
	}
	if got, want := readFile(t, path), ts(2)+" stdout F next\n"; got != want {
		t.Errorf("current file %q, want %q", got, want)
	}
}

func TestWriterConcurrentStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, path, 64*1024, 100)
	const lines = 2000
	var wg sync.WaitGroup
	for _, stream := range []string{Stdout, Stderr} {
		wg.Go(func() {
			var buf bytes.Buffer
			for i := range lines {
				fmt.Fprintf(&buf, "%s line %d\n", stream, i)
			}
			// Odd-sized writes cut lines anywhere.
			b := buf.Bytes()
			for len(b) > 0 {
				n := min(len(b), 7+len(b)%13)
				if _, err := w.Stream(stream).Write(b[:n]); err != nil {
					t.Error(err)
					return
				}
				b = b[n:]
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Read(t.Context(), path, ReadOptions{TailLines: -1}, &buf); err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var stream string
		var i int
		if _, err := fmt.Sscanf(sc.Text(), "%s line %d", &stream, &i); err != nil || next[stream] != i {
			t.Fatalf("line %q: want %s line %d (err %v)", sc.Text(), stream, next[stream], err)
		}
		next[stream]++
	}
	if next[Stdout] != lines || next[Stderr] != lines {
		t.Errorf("lines read %v, want %d of each", next, lines)
	}
}

func TestNewWriterInvalid(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		path     string
		maxSize  int64
		maxFiles int
		want     string
	}{
		{"empty path", "", 100, 1, "empty path"},
		{"zero size", filepath.Join(dir, "a"), 0, 1, "maxSize 0"},
		{"no files", filepath.Join(dir, "a"), 100, 0, "maxFiles 0"},
		{"no directory", filepath.Join(dir, "nodir", "a"), 100, 1, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWriter(tc.path, tc.maxSize, tc.maxFiles, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestStreamUnknownNamePanics(t *testing.T) {
	w := newTestWriter(t, filepath.Join(t.TempDir(), "0.log"), 100, 1)
	defer func() {
		if recover() == nil {
			t.Error("Stream(\"stdin\") did not panic")
		}
	}()
	w.Stream("stdin")
}
