package clock

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/isle-cluster/isle/raft/atomicfile"
)

// File, in a board's data directory, is the time the board saved (RFC
// 3339, one line): at its last clean stop, or when a server first told it
// the time after a start.
const File = "clock"

// Save writes t to dir's File, durably.
func Save(dir string, t time.Time) error {
	if err := atomicfile.Write(filepath.Join(dir, File), []byte(t.UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return fmt.Errorf("clock: save the time: %w", err)
	}
	return nil
}

// load reads dir's File; the zero time when there is none.
func load(dir string) (time.Time, error) {
	path := filepath.Join(dir, File)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("clock: read the saved time: %w", err)
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, fmt.Errorf("clock: %s: not a time: %w", path, err)
	}
	return t, nil
}

// commitTime is the time of the commit isle was built from (RFC 3339),
// stamped at link time by the Makefile (-ldflags -X); without it, Go's
// build information (vcs.time) is used when it has it.
var commitTime string

// Earliest is the earliest time isle can be running at: a day before
// the commit it was built from (the zero time when the binary does not
// know it). The commit's time was taken from another machine's clock,
// and a test run right after the commit must not set this machine's.
func Earliest() time.Time {
	stamp := commitTime
	if info, ok := debug.ReadBuildInfo(); ok && stamp == "" {
		for _, s := range info.Settings {
			if s.Key == "vcs.time" {
				stamp = s.Value
			}
		}
	}
	t, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return time.Time{}
	}
	return t.Add(-24 * time.Hour)
}

// Floor is the latest of the times the board knows the time is not
// before: earliest (Earliest), the time saved in dir's File,
// and the start of validity of certs (the CA's, the board's own; they are
// backdated by an hour already). A saved time after
// the end of validity of every one of certs is ignored, and said so: a
// clock once far ahead would otherwise take every later start there. An
// unreadable saved time is logged and ignored: it is only a floor.
func Floor(log *slog.Logger, earliest time.Time, dir string, certs ...*x509.Certificate) Reading {
	r := Reading{Source: "the day before isle's build", Time: earliest, At: time.Now()}
	var lastValid time.Time
	for _, c := range certs {
		if c.NotBefore.After(r.Time) {
			r.Source, r.Time = "the start of validity of the certificate of "+c.Subject.CommonName+",", c.NotBefore
		}
		if c.NotAfter.After(lastValid) {
			lastValid = c.NotAfter
		}
	}
	saved, err := load(dir)
	switch {
	case err != nil:
		log.Warn("clock: the saved time is ignored", "err", err)
	case len(certs) > 0 && saved.After(lastValid):
		log.Warn("clock: the saved time is ignored: it is after the end of validity of the board's certificates", "saved", stamp(saved), "file", filepath.Join(dir, File))
	case saved.After(r.Time):
		r.Source, r.Time = "the time saved at the last stop", saved
	}
	return r
}
