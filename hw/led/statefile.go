package led

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// StateFileName is the file, in isle's run directory, that holds the
// board's LED State for `isle status`.
const StateFileName = "leds.json"

// StateFile returns a Board watcher that keeps path holding the Board's
// State as JSON, replaced whole (written beside it and renamed, so a
// reader never sees half of one) when its pattern or its counters change:
// not at each edge of a blinking pattern, which a reader animates itself
// (ReadyLitAt), so an idle board writes nothing. ReadyLit and ActivityLit
// are left out. It is meant for a run directory on a tmpfs: nothing is
// synced to disk. A failed write is logged once, until one succeeds
// again.
func StateFile(path string, log *slog.Logger) func(State) {
	failing := false
	var last *State
	return func(st State) {
		st.ReadyLit, st.ActivityLit = false, false
		if last != nil && *last == st {
			return
		}
		err := writeState(path, st)
		if err == nil {
			last = &st
		}
		switch {
		case err != nil && !failing:
			log.Warn("LED state not written; `isle status` shows it stale", "err", err)
		case err == nil && failing:
			log.Info("LED state written again", "path", path)
		}
		failing = err != nil
	}
}

func writeState(path string, st State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("led: state file %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("led: state file: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644) // for `isle status` without root
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("led: state file: %w", err)
	}
	return nil
}

// ReadStateFile reads a State that StateFile wrote.
func ReadStateFile(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("led: read state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("led: read state %s: %w", path, err)
	}
	return st, nil
}
