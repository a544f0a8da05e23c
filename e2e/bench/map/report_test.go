package main

import (
	"strings"
	"testing"
	"time"
)

func TestMapURL(t *testing.T) {
	for _, tc := range []struct {
		out, want, err string
	}{
		{out: "The island's map: http://127.0.0.1:40789/isle/map/ (of 127.0.0.1:43005, as admin.kubeconfig's user); Ctrl-C stops it\n",
			want: "http://127.0.0.1:40789/isle/map/"},
		{out: "", err: "not said"},
		{out: "The island's map: http://10.0.0.1:80/isle/map/ (of x)\n", err: "says"},
	} {
		got, err := mapURL(tc.out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("mapURL(%q) = %q, %v; want an error with %q", tc.out, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("mapURL(%q) = %q, %v; want %q", tc.out, got, err, tc.want)
		}
	}
}

func TestSinceMillis(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	if got := sinceMillis(t0, 1_700_000_000_250.5); got != 250500*time.Microsecond {
		t.Errorf("sinceMillis = %v, want 250.5ms", got)
	}
}

func TestLongest(t *testing.T) {
	f := frames{Intervals: []float64{16.7, 100, 33.3, 50}, At: []float64{1016.7, 1116.7, 1150, 1200}}
	if got, want := longest(f, 1000, 2), "100 ms at +117 ms, 50 ms at +200 ms"; got != want {
		t.Errorf("longest = %q, want %q", got, want)
	}
	if got := longest(frames{}, 0, 3); got != "(no frames)" {
		t.Errorf("longest of none = %q", got)
	}
}

func TestTrimZero(t *testing.T) {
	for in, want := range map[string]string{"1.50": "1.5", "2.00": "2", "0.25": "0.25", "12": "12"} {
		if got := trimZero(in); got != want {
			t.Errorf("trimZero(%q) = %q, want %q", in, got, want)
		}
	}
}
