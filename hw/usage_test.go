package hw

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCPUTimes(t *testing.T) {
	const pi4 = `cpu  100 10 50 800 40 5 5 0 7 0
cpu0 25 2 12 200 10 1 1 0 0 0
cpu1 25 3 13 200 10 1 1 0 0 0
cpu2 25 2 12 200 10 1 1 0 0 0
cpu3 25 3 13 200 10 2 2 0 0 0
intr 1 2 3
ctxt 123
`
	for _, tc := range []struct {
		name, text string
		want       CPUTimes
		wantErr    bool
	}{
		{"four cores", pi4, CPUTimes{Busy: 170, Total: 1010, CPUs: 4}, false},
		{"old kernel without steal", "cpu 1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\n", CPUTimes{}, true},
		{"garbage", "cpu 1 2 x 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", CPUTimes{}, true},
		{"no per-CPU lines", "cpu 1 2 3 4 5 6 7 8\n", CPUTimes{}, true},
		{"empty", "", CPUTimes{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readCPUTimes(writeFile(t, tc.text))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := readCPUTimes(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file read without error")
	}
}

func TestCoresSince(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prev, cur CPUTimes
		want      float64
		ok        bool
	}{
		{"one of four cores busy", CPUTimes{Busy: 100, Total: 1000, CPUs: 4}, CPUTimes{Busy: 200, Total: 1400, CPUs: 4}, 1, true},
		{"idle", CPUTimes{Busy: 100, Total: 1000, CPUs: 4}, CPUTimes{Busy: 100, Total: 1400, CPUs: 4}, 0, true},
		{"all busy", CPUTimes{Busy: 100, Total: 1000, CPUs: 2}, CPUTimes{Busy: 300, Total: 1200, CPUs: 2}, 2, true},
		{"iowait went backwards", CPUTimes{Busy: 100, Total: 1000, CPUs: 2}, CPUTimes{Busy: 300, Total: 1100, CPUs: 2}, 2, true},
		{"no time passed", CPUTimes{Busy: 100, Total: 1000, CPUs: 4}, CPUTimes{Busy: 100, Total: 1000, CPUs: 4}, 0, false},
		{"another boot", CPUTimes{Busy: 100, Total: 1000, CPUs: 4}, CPUTimes{Busy: 10, Total: 1100, CPUs: 4}, 0, false},
	} {
		got, ok := tc.cur.CoresSince(tc.prev)
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestMemoryWorkingSet(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       int64
	}{
		{"pi zero", "MemTotal:  439592 kB\nMemFree:  100000 kB\nMemAvailable:  239592 kB\n", 200000 * 1024},
		{"no MemAvailable", "MemTotal:  439592 kB\nMemFree:  1 kB\n", -1},
		{"garbage", "MemTotal:  lots kB\nMemAvailable:  1 kB\n", -1},
	} {
		got, err := memoryWorkingSet(writeFile(t, tc.text))
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%s: %d, want an error", tc.name, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, got, err, tc.want)
		}
	}
}

// The real files of this machine read, and give plausible numbers.
func TestUsageOfThisMachine(t *testing.T) {
	a, err := ReadCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	if a.CPUs < 1 || a.Total == 0 || a.Busy > a.Total {
		t.Fatalf("CPU times %+v", a)
	}
	ws, err := ReadMemoryWorkingSet()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if ws <= 0 || ws > f.Memory {
		t.Fatalf("working set %d of %d bytes", ws, f.Memory)
	}
}
