package raft

import (
	"fmt"
	"log/slog"
	"os"
)

// raftLogger adapts slog to etcd raft's Logger. Raft's chatty Info level
// (every vote, every term) goes to slog's Debug; warnings and errors stay.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...interface{})                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...interface{}) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...interface{})                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...interface{})  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...interface{})               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...interface{}) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...interface{})                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...interface{}) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...interface{})                 { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...interface{}) { r.Panicf(format, v...) }
func (r raftLogger) Panic(v ...interface{}) {
	s := fmt.Sprint(v...)
	r.l.Error(s)
	fmt.Fprintln(os.Stderr, "raft: fatal:", s)
	panic(s)
}
func (r raftLogger) Panicf(format string, v ...interface{}) { r.Panic(fmt.Sprintf(format, v...)) }
