package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/isle-cluster/isle/node/agent"
)

// capture is an slog handler keeping its records' levels and text.
type capture struct {
	min   slog.Level
	lines *[]string
	attrs []slog.Attr
}

func (c capture) Enabled(_ context.Context, l slog.Level) bool { return l >= c.min }

func (c capture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range c.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s", a); return true })
	*c.lines = append(*c.lines, b.String())
	return nil
}

func (c capture) WithAttrs(as []slog.Attr) slog.Handler {
	c.attrs = append(append([]slog.Attr(nil), c.attrs...), as...)
	return c
}

func (c capture) WithGroup(string) slog.Handler { return c }

var errQuiet = errors.New("reported elsewhere")

func newSink(min slog.Level) (*klogSink, *[]string) {
	var lines []string
	return &klogSink{h: capture{min: min, lines: &lines}, quiet: func(err error) bool { return errors.Is(err, errQuiet) }}, &lines
}

// The levels of what logr callers (client-go's contextual logging) log.
func TestKlogSinkLevels(t *testing.T) {
	for _, tc := range []struct {
		name string
		min  slog.Level
		log  func(l logr.Logger)
		want []string // nil: nothing written
	}{
		{"info", slog.LevelInfo, func(l logr.Logger) { l.Info("Caches populated", "type", "*v1.Pod") },
			[]string{"INFO Caches populated type=*v1.Pod"}},
		{"V(2) hidden at info", slog.LevelInfo, func(l logr.Logger) { l.V(2).Info("Listing and watching") }, nil},
		{"V(2) is debug", slog.LevelDebug, func(l logr.Logger) { l.V(2).Info("Listing and watching") },
			[]string{"DEBUG Listing and watching"}},
		{"V(4) is debug", slog.LevelDebug, func(l logr.Logger) { l.V(4).Info("Watch closed") }, []string{"DEBUG Watch closed"}},
		{"V(6) is below debug", slog.LevelDebug, func(l logr.Logger) { l.V(6).Info("Pong message received") }, nil},
		{"V(6) at its level", slog.LevelDebug - 2, func(l logr.Logger) { l.V(6).Info("Pong message received") },
			[]string{"DEBUG-2 Pong message received"}},
		{"a warning", slog.LevelInfo, func(l logr.Logger) { l.Info("Warning: watch ended with error", "reflector", "r") },
			[]string{"WARN watch ended with error reflector=r"}},
		{"a warning of a quiet error is debug", slog.LevelInfo, func(l logr.Logger) {
			l.Info("Warning: watch ended with error", "reflector", "r", "err", fmt.Errorf("watch: %w", errQuiet))
		}, nil},
		{"an error", slog.LevelInfo, func(l logr.Logger) {
			l.WithName("UnhandledError").Error(errors.New("forbidden"), "Failed to watch", "reflector", "r")
		}, []string{"ERROR Failed to watch logger=UnhandledError err=forbidden reflector=r"}},
		{"a quiet error, wrapped as client-go does, is debug", slog.LevelInfo, func(l logr.Logger) {
			err := fmt.Errorf("failed to list *v1.Pod: %w", &url.Error{Op: "Get", URL: "https://x/api/v1/pods", Err: errQuiet})
			l.Error(err, "Failed to watch")
		}, nil},
		{"a quiet error at debug", slog.LevelDebug, func(l logr.Logger) { l.Error(errQuiet, "Failed to watch") },
			[]string{"DEBUG Failed to watch err=reported elsewhere"}},
		{"values and names", slog.LevelInfo, func(l logr.Logger) {
			l.WithName("a").WithName("b").WithValues("k", 1).Info("m", "x", "y")
		}, []string{"INFO m k=1 logger=a/b x=y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, lines := newSink(tc.min)
			tc.log(logr.New(s))
			if strings.Join(*lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", *lines, tc.want)
			}
		})
	}
}

// klog's printf-style lines keep their severity from klog's header.
func TestKlogSinkLines(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{"W1202 07:01:02.123456   12345 reflector.go:569] failed to list *v1.Pod: boom\n",
			"WARN failed to list *v1.Pod: boom caller=reflector.go:569"},
		{"E1201 12:00:00.000000 1 websocket.go:296] Unknown stream id 1, discarding message\n",
			"ERROR Unknown stream id 1, discarding message caller=websocket.go:296"},
		{"F1201 12:00:00.000000 1 x.go:1] the end\n", "ERROR the end caller=x.go:1"},
		{"I1201 12:00:00.000000 1 x.go:2] hello\n", "INFO hello caller=x.go:2"},
		{"no header at all\n", "INFO no header at all"},
	} {
		s, lines := newSink(slog.LevelInfo)
		s.writeKlogLine([]byte(tc.line))
		if len(*lines) != 1 || (*lines)[0] != tc.want {
			t.Errorf("%q: got %q, want %q", tc.line, *lines, tc.want)
		}
	}
}

// routeKlog takes over klog itself: its printf-style and structured calls
// reach the slog logger, nothing reaches stderr, and the agent's
// unreachable servers are debug lines.
func TestRouteKlog(t *testing.T) {
	var buf bytes.Buffer
	routeKlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), quietKlog)
	t.Cleanup(func() { klog.ClearLogger() })

	klog.Warningf("failed to list %s", "*v1.Node")
	klog.Errorf("Unknown stream id %d, discarding message", 1)
	klog.InfoS("Caches populated", "type", "*v1.Node")
	klog.V(4).InfoS("Watch closed")
	klog.ErrorS(fmt.Errorf("failed to list *v1.Node: %w", agent.ErrNoAPIServer), "Failed to watch")
	klog.Background().Error(errors.New("denied"), "Failed to watch", "reflector", "r")
	// A watch closed by a server as it went.
	klog.Background().Info("Warning: watch ended with error", "err", &cache.VeryShortWatchError{Name: "r"})
	klog.Flush()

	got := buf.String()
	for _, want := range []string{
		`level=WARN msg="failed to list *v1.Node" caller=klog_test.go:`,
		`level=ERROR msg="Unknown stream id 1, discarding message" caller=klog_test.go:`,
		`level=INFO msg="Caches populated" type=*v1.Node`,
		`level=ERROR msg="Failed to watch" err=denied reflector=r`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	for _, not := range []string{"Watch closed", "no API server", "very short watch"} {
		if strings.Contains(got, not) {
			t.Errorf("%q logged at info level:\n%s", not, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 4 {
		t.Errorf("%d lines, want 4:\n%s", n, got)
	}
}
