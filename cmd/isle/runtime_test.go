package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// A server collects at half its live heap grown unless GOGC says
// otherwise, and keeps no heap profile unless --debug serves it.
func TestTuneServerRuntime(t *testing.T) {
	rate := runtime.MemProfileRate
	was := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetGCPercent(was)
		runtime.MemProfileRate = rate
	})

	t.Setenv("GOGC", "")
	tuneServerRuntime(true)
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Errorf("GOGC %d, want %d", got, serverGCPercent)
	}
	if runtime.MemProfileRate != rate {
		t.Errorf("heap profile rate %d with --debug, want %d", runtime.MemProfileRate, rate)
	}

	t.Setenv("GOGC", "100")
	tuneServerRuntime(false)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d with the GOGC variable set to 100", got)
	}
	if runtime.MemProfileRate != 0 {
		t.Errorf("heap profile rate %d without --debug, want 0", runtime.MemProfileRate)
	}
}
