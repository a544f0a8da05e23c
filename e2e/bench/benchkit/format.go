package benchkit

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// Table is a benchmark's report: rows of measure, value, target and
// verdict, written as a markdown table with aligned columns.
type Table [][4]string

// Row adds a measure; with a target it adds the verdict too.
func (t *Table) Row(measure, value, target string, ok bool) {
	verdict := ""
	if target != "" {
		verdict = Verdict(ok)
	}
	*t = append(*t, [4]string{measure, value, target, verdict})
}

// Missing adds a measure that could not be taken.
func (t *Table) Missing(measure, target string) {
	verdict := ""
	if target != "" {
		verdict = "n/a"
	}
	*t = append(*t, [4]string{measure, "n/a", target, verdict})
}

// Write writes the table in markdown.
func (t Table) Write(w io.Writer) {
	head := [4]string{"measure", "isle", "target", ""}
	var width [4]int
	for _, r := range append(Table{head}, t...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(r [4]string) {
		for i, c := range r {
			fmt.Fprintf(w, "| %-*s ", width[i], c)
		}
		fmt.Fprintln(w, "|")
	}
	line(head)
	for _, n := range width {
		fmt.Fprintf(w, "|%s", strings.Repeat("-", n+2))
	}
	fmt.Fprintln(w, "|")
	for _, r := range t {
		line(r)
	}
}

// Quantile is the q-quantile of ds by nearest rank; ds is not changed.
func Quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
