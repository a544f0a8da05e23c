package benchkit

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGroup(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{0.49, "0"},
		{999.5, "1,000"},
		{12345, "12,345"},
		{1234567.2, "1,234,567"},
	} {
		if got := Group(tc.in); got != tc.want {
			t.Errorf("Group(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStatusFields(t *testing.T) {
	status := []byte("Name:\tisle\nState:\tS (sleeping)\nVmHWM:\t   30000 kB\nVmRSS:\t   20480 kB\nRssAnon:\t    8192 kB\nRssFile:\t   12288 kB\nThreads:\t9\n")
	got, err := ProcFields(status, "VmRSS", "RssAnon", "Threads")
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{20480 << 10, 8192 << 10, 9}; !slices.Equal(got, want) {
		t.Errorf("ProcFields = %v, want %v", got, want)
	}
	if _, err := ProcFields(status, "VmRSS", "VmSwap"); err == nil || !strings.Contains(err.Error(), "VmSwap") {
		t.Errorf("ProcFields without a VmSwap line: err = %v, want one naming VmSwap", err)
	}
}

func TestCPUTime(t *testing.T) {
	for _, c := range []struct {
		name, stat string
		want       time.Duration
		err        bool
	}{
		{"plain", "42 (isle) S 1 42 42 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 9 0 1234", 3800 * time.Millisecond, false},
		{"command with spaces and parentheses", "42 (a b) c)) S 1 42 42 0 -1 0 0 0 0 0 7 3 0 0", 100 * time.Millisecond, false},
		{"no command", "42 isle S 1", 0, true},
		{"too short", "42 (isle) S 1 42", 0, true},
		{"not numbers", "42 (isle) S 1 42 42 0 -1 0 0 0 0 0 x y 0 0", 0, true},
	} {
		got, err := CPUTime([]byte(c.stat))
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: CPUTime = %v, %v; want %v, error %v", c.name, got, err, c.want, c.err)
		}
	}
}

func TestFaults(t *testing.T) {
	for _, c := range []struct {
		name, stat   string
		minor, major uint64
		err          bool
	}{
		{"plain", "42 (isle) S 1 42 42 0 -1 4194560 1500 7 3 0 250 130 0 0 20 0 9 0 1234", 1500, 3, false},
		{"command with spaces and parentheses", "42 (a b) c)) S 1 42 42 0 -1 0 12 0 1 0 7 3", 12, 1, false},
		{"no command", "42 isle S 1", 0, 0, true},
		{"too short", "42 (isle) S 1 42 42 0 -1 0 12", 0, 0, true},
		{"not numbers", "42 (isle) S 1 42 42 0 -1 0 x 0 y 0", 0, 0, true},
	} {
		minor, major, err := Faults([]byte(c.stat))
		if (err != nil) != c.err || minor != c.minor || major != c.major {
			t.Errorf("%s: Faults = %d, %d, %v; want %d, %d, error %v", c.name, minor, major, err, c.minor, c.major, c.err)
		}
	}
}

func TestQuantile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range n {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	for _, c := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of four", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(100)...), 0.99, 99 * time.Millisecond},
		{"p99 of 50 is the max", ms(seq(50)...), 0.99, 50 * time.Millisecond},
	} {
		if got := Quantile(c.sorted, c.q); got != c.want {
			t.Errorf("%s: Quantile = %v, want %v", c.name, got, c.want)
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}
