package transport

import (
	"sync/atomic"
	"time"
)

// logLimiter lets one log line through per interval and counts the rest, so
// a dead peer or a flood of drops cannot flood the log. Safe for concurrent
// use; allocation- and lock-free for the Send path.
type logLimiter struct {
	last       atomic.Int64 // UnixNano of the last line let through; 0 = never
	suppressed atomic.Int64
}

// allow reports whether to log now and, if so, how many events were
// suppressed since the previous line.
func (l *logLimiter) allow(every time.Duration) (bool, int64) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if last != 0 && now-last < int64(every) {
		l.suppressed.Add(1)
		return false, 0
	}
	if !l.last.CompareAndSwap(last, now) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
