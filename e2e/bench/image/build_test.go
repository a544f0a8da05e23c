package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRecorder(t *testing.T) {
	var out bytes.Buffer
	rec := newRecorder(slog.NewTextHandler(&out, nil))
	log := slog.New(rec).With("board", "rpi4")
	log.Info("image: root filesystem (cached: false)", "took", 4*time.Minute)
	log.WithGroup("g").Info("building the root filesystem with mmdebstrap", "packages", 17)
	log.Info("image: disk image", "size", 1, "took", 2*time.Second)
	log.Debug("not enabled", "took", time.Second)

	want := []step{
		{msg: "image: root filesystem (cached: false)", took: 4 * time.Minute, timed: true},
		{msg: "building the root filesystem with mmdebstrap"},
		{msg: "image: disk image", took: 2 * time.Second, timed: true},
	}
	got := rec.recorded()
	if len(got) != len(want) {
		t.Fatalf("recorded %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, s := range []string{"board=rpi4", "took=4m0s", "g.packages=17", `msg="image: disk image"`} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the log passed on lacks %q:\n%s", s, out.String())
		}
	}
	if strings.Contains(out.String(), "not enabled") {
		t.Errorf("a debug record was passed on:\n%s", out.String())
	}
}

func TestRootfsTime(t *testing.T) {
	for _, c := range []struct {
		name   string
		steps  []step
		took   time.Duration
		cached bool
		err    string
	}{
		{"built", []step{{msg: "building"}, {msg: "image: root filesystem (cached: false)", took: time.Minute, timed: true}}, time.Minute, false, ""},
		{"cached", []step{{msg: "image: root filesystem (cached: true)", took: 3 * time.Millisecond, timed: true}, {msg: "image: root and boot trees", took: time.Second, timed: true}}, 3 * time.Millisecond, true, ""},
		{"none", []step{{msg: "image: disk image", took: time.Second, timed: true}}, 0, false, `no step "image: root filesystem"`},
		{"untimed", []step{{msg: "image: root filesystem (cached: true)"}}, 0, false, "has no took"},
		{"changed", []step{{msg: "image: root filesystem from the cache", took: time.Second, timed: true}}, 0, false, "(cached: true) or (cached: false)"},
	} {
		took, cached, err := rootfsTime(c.steps)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || took != c.took || cached != c.cached {
			t.Errorf("%s: %v %v %v, want %v %v", c.name, took, cached, err, c.took, c.cached)
		}
	}
}
