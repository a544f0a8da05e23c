package clock

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// board is a clock whose system time is *sys and whose setting of it
// fails with setErr.
func board(sys *time.Time, setErr error, set *[]time.Time) *Clock {
	return &Clock{
		now: func() time.Time { return *sys },
		set: func(t time.Time) error {
			*set = append(*set, t)
			if setErr != nil {
				return setErr
			}
			*sys = t
			return nil
		},
	}
}

func TestAdvance(t *testing.T) {
	cluster := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		system  time.Time
		setErr  error
		moved   bool
		set     int       // calls of set
		want    time.Time // Now afterwards
		wantSys time.Time // the system's time afterwards
		log     string
	}{
		{"a year behind", cluster.AddDate(-1, 0, 0), nil, true, 1, cluster, cluster,
			"clock: system time 2025-12-02T07:00:00Z is behind the cluster's 2026-12-02T07:00:00Z; set to 2026-12-02T07:00:00Z"},
		{"1970", time.Unix(5, 0), nil, true, 1, cluster, cluster, "clock: system time 1970-01-01T00:00:05Z is behind"},
		{"within MaxBehind", cluster.Add(-MaxBehind + time.Second), nil, false, 0, cluster.Add(-MaxBehind + time.Second), cluster.Add(-MaxBehind + time.Second), ""},
		{"ahead: never moved back", cluster.AddDate(1, 0, 0), nil, false, 0, cluster.AddDate(1, 0, 0), cluster.AddDate(1, 0, 0), ""},
		{"no CAP_SYS_TIME", cluster.AddDate(-1, 0, 0), syscall.EPERM, true, 1, cluster, cluster.AddDate(-1, 0, 0),
			"cannot set the system clock (operation not permitted: isle needs CAP_SYS_TIME"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys := tc.system
			var set []time.Time
			c := board(&sys, tc.setErr, &set)
			var buf bytes.Buffer
			// The reading was taken just now: time.Since(At) is tiny.
			moved := c.Advance(Reading{Source: "the cluster's", Server: "10.0.0.1:6443", Time: cluster, At: time.Now()}, slog.New(slog.NewTextHandler(&buf, nil)))
			if moved != tc.moved || len(set) != tc.set {
				t.Fatalf("moved %v with %d settings of the system clock, want %v and %d", moved, len(set), tc.moved, tc.set)
			}
			if d := c.Now().Sub(tc.want); d < 0 || d > time.Second {
				t.Errorf("Now %v, want %v", c.Now(), tc.want)
			}
			if d := sys.Sub(tc.wantSys); d < 0 || d > time.Second {
				t.Errorf("system time %v, want %v", sys, tc.wantSys)
			}
			if tc.log == "" && buf.Len() > 0 || !strings.Contains(buf.String(), tc.log) {
				t.Errorf("log %q, want %q", buf.String(), tc.log)
			}
			if tc.moved && strings.Count(buf.String(), "\n") != 1 {
				t.Errorf("log %q, want one line", buf.String())
			}
		})
	}
}

func TestShiftedNeverSetsTheSystemClock(t *testing.T) {
	c := Shifted(-365 * 24 * time.Hour)
	if d := time.Since(c.Now()); d < 364*24*time.Hour {
		t.Fatalf("shifted clock is %v behind, want a year", d)
	}
	var buf bytes.Buffer
	if !c.Advance(Reading{Source: "the cluster's", Time: time.Now(), At: time.Now()}, slog.New(slog.NewTextHandler(&buf, nil))) {
		t.Fatal("a year behind, not moved")
	}
	if d := time.Since(c.Now()); d > time.Second || d < -time.Second {
		t.Fatalf("after Advance the clock is %v off", d)
	}
	if !strings.Contains(buf.String(), "the system clock is left alone") {
		t.Fatalf("log %q", buf.String())
	}
}

func cert(t *testing.T, cn string, from, to time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: from, NotAfter: to}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFloor(t *testing.T) {
	build := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ca := cert(t, "isle-ca", build.AddDate(0, 0, 10), build.AddDate(10, 0, 0))
	old := cert(t, "old", build.AddDate(-2, 0, 0), build.AddDate(-1, 0, 0))
	discard := slog.New(slog.DiscardHandler)

	dir := t.TempDir()
	if r := Floor(discard, time.Time{}, dir); !r.Time.IsZero() {
		t.Fatalf("nothing known: %+v", r)
	}
	if r := Floor(discard, build, dir); !r.Time.Equal(build) || r.Source != "the day before isle's build" {
		t.Fatalf("nothing but the build: %+v", r)
	}
	if r := Floor(discard, build, dir, ca, old); !r.Time.Equal(ca.NotBefore) || !strings.Contains(r.Source, "certificate of isle-ca") {
		t.Fatalf("with the CA: %+v", r)
	}
	saved := build.AddDate(0, 1, 0)
	if err := Save(dir, saved); err != nil {
		t.Fatal(err)
	}
	if r := Floor(discard, build, dir, ca); !r.Time.Equal(saved) || r.Source != "the time saved at the last stop" {
		t.Fatalf("with a saved time: %+v", r)
	}
	// A time saved by a clock far ahead is not a floor.
	if err := Save(dir, build.AddDate(50, 0, 0)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if r := Floor(slog.New(slog.NewTextHandler(&buf, nil)), build, dir, ca); !r.Time.Equal(ca.NotBefore) {
		t.Fatalf("with a saved time beyond the certificates: %+v", r)
	}
	if !strings.Contains(buf.String(), "after the end of validity") {
		t.Fatalf("log %q", buf.String())
	}
	// A torn or foreign file is said and ignored: it is only a floor.
	if err := os.WriteFile(filepath.Join(dir, File), []byte("2026-1"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if r := Floor(slog.New(slog.NewTextHandler(&buf, nil)), build, dir); !r.Time.Equal(build) {
		t.Fatalf("with a torn file: %+v", r)
	}
	if !strings.Contains(buf.String(), filepath.Join(dir, File)+": not a time") {
		t.Fatalf("log %q, want the file named", buf.String())
	}
	// A data directory that cannot be written: said, with the operation.
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Save(filepath.Join(dir, "file", "dir"), build); err == nil || !strings.HasPrefix(err.Error(), "clock: save the time:") {
		t.Fatalf("saved under a file: %v", err)
	}
}
