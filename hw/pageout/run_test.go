package pageout

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// records is a slog handler that sends each message logged, with its
// attributes, on a channel.
type records chan string

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	select {
	case r <- msg:
	default: // the test has what it needs
	}
	return nil
}
func (r records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r records) WithGroup(string) slog.Handler      { return r }

// Run releases at once, then every period, and returns when ctx ends.
func TestRun(t *testing.T) {
	rec := make(records, 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, 0, time.Millisecond, slog.New(rec)); close(done) }()
	timeout := time.After(10 * time.Second)
	for range 3 {
		select {
		case msg := <-rec:
			if !strings.HasPrefix(msg, "pageout: the binary's unused pages released advised=") || strings.Contains(msg, "err=") {
				t.Errorf("Run logged %q, want a release with its figures", msg)
			}
		case <-timeout:
			t.Fatal("Run released fewer than 3 times in 10s")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
