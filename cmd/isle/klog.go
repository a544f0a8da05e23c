package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// client-go (the node agent's informers and REST clients) logs through
// klog. routeKlog sends klog's lines to the board's slog logger at the level
// they mean, instead of klog's own lines on stderr:
//
//	klog.Error*, ErrorS, logr Error        → Error; Debug if quiet(err)
//	klog.Fatal*                            → Error (klog exits after it)
//	klog.Warning*; "Warning: …" at V(0)    → Warn; Debug if quiet(its err)
//	klog.Info*, InfoS, logr V(0)           → Info
//	V(1) … V(4)                            → Debug
//	V(n), n > 4 (each request, each frame) → below Debug: Debug-(n-4)
//
// quiet picks the errors that are logged elsewhere once per change of
// state (the agent's unreachable API servers, agent.Unreachable): the
// informers retry them, each every second or so, and say so at debug
// level only.
func routeKlog(log *slog.Logger, quiet func(error) bool) {
	s := &klogSink{h: log.Handler(), quiet: quiet}
	klog.SetLoggerWithOptions(logr.New(s), klog.ContextualLogger(true), klog.WriteKlogBuffer(s.writeKlogLine))
}

// klogSink is a logr.LogSink writing slog records. klog's printf-style
// calls (Infof, Warningf, Errorf …) come to writeKlogLine as klog's text
// line, whose header tells their severity; its structured calls and
// client-go's contextual loggers come to Info and Error.
type klogSink struct {
	h     slog.Handler
	name  string // the logr name ("reflector/…"), an attribute if set
	quiet func(error) bool
}

var _ logr.LogSink = (*klogSink)(nil)

// vLevel is the slog level of a logr verbosity.
func vLevel(v int) slog.Level {
	switch {
	case v <= 0:
		return slog.LevelInfo
	case v <= 4:
		return slog.LevelDebug
	default:
		return slog.LevelDebug - slog.Level(v-4)
	}
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(v int) bool {
	return s.h.Enabled(context.Background(), vLevel(v))
}

func (s *klogSink) Info(v int, msg string, kv ...any) {
	level := vLevel(v)
	if v <= 0 && strings.HasPrefix(msg, "Warning: ") {
		// client-go's warnings through a logr logger, which has none.
		level, msg = slog.LevelWarn, strings.TrimPrefix(msg, "Warning: ")
		if s.quietValue(kv) {
			level = slog.LevelDebug
		}
	}
	s.write(level, msg, nil, kv)
}

// quietValue reports whether one of the values kv is a quiet error.
func (s *klogSink) quietValue(kv []any) bool {
	for _, v := range kv {
		if err, ok := v.(error); ok && s.quiet != nil && s.quiet(err) {
			return true
		}
	}
	return false
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	level := slog.LevelError
	if err != nil && s.quiet != nil && s.quiet(err) {
		level = slog.LevelDebug
	}
	s.write(level, msg, err, kv)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	var r slog.Record
	r.Add(kv...)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	c.h = s.h.WithAttrs(attrs)
	return &c
}

func (s *klogSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}

// writeKlogLine writes one of klog's text lines,
// "Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg", L being its severity:
// I, W, E or F.
func (s *klogSink) writeKlogLine(line []byte) {
	line = bytes.TrimRight(line, "\n")
	level, msg, caller := slog.LevelInfo, string(line), ""
	if head, rest, ok := bytes.Cut(line, []byte("] ")); ok && len(head) > 0 {
		switch head[0] {
		case 'W':
			level = slog.LevelWarn
		case 'E', 'F':
			level = slog.LevelError
		}
		msg = string(rest)
		if i := bytes.LastIndexByte(head, ' '); i >= 0 {
			caller = string(head[i+1:])
		}
	}
	var kv []any
	if caller != "" {
		kv = []any{"caller", caller}
	}
	s.write(level, msg, nil, kv)
}

func (s *klogSink) write(level slog.Level, msg string, err error, kv []any) {
	ctx := context.Background()
	if !s.h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	if s.name != "" {
		r.AddAttrs(slog.String("logger", s.name))
	}
	if err != nil {
		r.AddAttrs(slog.Any("err", err))
	}
	r.Add(kv...)
	_ = s.h.Handle(ctx, r)
}
