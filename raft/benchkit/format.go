package benchkit

import (
	"strconv"
	"strings"
)

// Verdict says whether a target holds.
func Verdict(ok bool) string {
	if ok {
		return "holds"
	}
	return "MISSED"
}

// Group formats f rounded to an integer, with thousands separators.
func Group(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
