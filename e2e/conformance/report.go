package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// result is one spec's outcome.
type result struct {
	name  string // full name, as e2e.test --list-tests prints it
	sig   string // "api-machinery", … from the name's [sig-…] tag
	state string // "passed", "failed", "skipped", "not run"
	secs  float64
	cause string // a failure's first line, or why it was skipped
}

// junitCase is the part of ginkgo's JUnit testcase element read here.
type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

type junitSuites struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

// leafPrefix is how ginkgo starts a testcase's name: "[It] ", or the node
// type of a suite-level node ("[SynchronizedBeforeSuite] ").
var leafPrefix = regexp.MustCompile(`^\[([A-Za-z]+)\] ?`)

// readJUnit reads one pass's JUnit report: the results of the specs in
// want (ginkgo also lists every spec its focus left out, as skipped), and
// the failures of suite-level nodes (a failed BeforeSuite fails them all).
func readJUnit(r io.Reader, want map[string]bool) (map[string]result, []string, error) {
	var doc junitSuites
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("report: JUnit: %w", err)
	}
	results := map[string]result{}
	var suiteFailures []string
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			m := leafPrefix.FindStringSubmatch(c.Name)
			name := strings.TrimSpace(strings.TrimPrefix(c.Name, safeIndex(m, 0)))
			body := ""
			switch {
			case c.Failure != nil:
				body = c.Failure.Message + "\n" + c.Failure.Body
			case c.Error != nil:
				body = c.Error.Message + "\n" + c.Error.Body
			}
			if m != nil && m[1] != "It" {
				if body != "" {
					suiteFailures = append(suiteFailures, m[1]+": "+firstCause(body))
				}
				continue
			}
			if !want[name] {
				continue
			}
			res := result{name: name, sig: sigOf(name), secs: c.Time}
			switch {
			case c.Failure != nil || c.Error != nil || c.Status == "failed" || c.Status == "panicked" || c.Status == "timedout" || c.Status == "interrupted":
				res.state, res.cause = "failed", firstCause(body)
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				res.state = "skipped"
				if c.Skipped != nil {
					res.cause = strings.TrimPrefix(c.Skipped.Message, "skipped - ")
				}
			default:
				res.state = "passed"
			}
			results[name] = res
		}
	}
	return results, suiteFailures, nil
}

func safeIndex(m []string, i int) string {
	if len(m) > i {
		return m[i]
	}
	return ""
}

var sigTag = regexp.MustCompile(`\[sig-([a-z-]+)\]`)

func sigOf(name string) string {
	if m := sigTag.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return "other"
}

// failedLine is ginkgo's first line of a failure: "[FAILED] message".
var failedLine = regexp.MustCompile(`(?m)^\s*\[(?:FAILED|PANICKED|TIMEDOUT|INTERRUPTED)\]\s*(.*)$`)

// firstCause is the line of a failure's text that says what failed.
func firstCause(body string) string {
	line := ""
	if m := failedLine.FindStringSubmatchIndex(body); m != nil {
		line = body[m[2]:m[3]]
		// Gomega's "Expected\n    <string>: a\nto equal\n    <string>: b"
		// continues on the lines below, up to the location line.
		if rest := body[m[1]:]; strings.TrimSpace(line) == "Expected" || strings.HasSuffix(line, ":") {
			for _, l := range strings.Split(rest, "\n") {
				l = strings.TrimSpace(l)
				if strings.HasPrefix(l, "In [") || strings.HasPrefix(l, "[") && strings.Contains(l, "] in [") {
					break
				}
				if l != "" {
					line += " " + l
				}
			}
		}
	}
	if line == "" {
		for _, l := range strings.Split(body, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				line = l
				break
			}
		}
	}
	line = strings.Join(strings.Fields(line), " ")
	if len(line) > 240 {
		line = line[:237] + "..."
	}
	return line
}

// causeKey groups failures of one cause: numbers, generated names and
// addresses differ from spec to spec.
func causeKey(cause string) string {
	k := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(cause, `"…"`)
	k = regexp.MustCompile(`[0-9]+(\.[0-9]+)*`).ReplaceAllString(k, "N")
	if len(k) > 120 {
		k = k[:120]
	}
	return k
}

// sigs are the SIGs of the summary's table, in its order.
var sigs = []string{"api-machinery", "apps", "auth", "cli", "network", "node", "scheduling", "storage"}

// counts are one row of the summary's table.
type counts struct{ passed, failed, skipped, notRun int }

func (c *counts) add(state string) {
	switch state {
	case "passed":
		c.passed++
	case "failed":
		c.failed++
	case "skipped":
		c.skipped++
	default:
		c.notRun++
	}
}

func (c counts) total() int { return c.passed + c.failed + c.skipped + c.notRun }

// summary is a run's outcome.
type summary struct {
	commit, isleVersion, suite string
	date                       time.Time
	wall                       time.Duration
	island                     string
	results                    []result // every selected spec, by name
	suiteFailures              []string
}

// collect makes the summary's results: every selected spec, those without
// a result in any report as "not run".
func collect(selected []string, reports []map[string]result) []result {
	out := make([]result, 0, len(selected))
	for _, n := range selected {
		r := result{name: n, sig: sigOf(n), state: "not run"}
		for _, rep := range reports {
			if got, ok := rep[n]; ok {
				r = got
			}
		}
		out = append(out, r)
	}
	return out
}

func (s summary) bySIG() (map[string]*counts, counts) {
	per := map[string]*counts{}
	var all counts
	for _, r := range s.results {
		if per[r.sig] == nil {
			per[r.sig] = &counts{}
		}
		per[r.sig].add(r.state)
		all.add(r.state)
	}
	return per, all
}

// failed are the failed specs, by name.
func (s summary) failed() []result {
	var f []result
	for _, r := range s.results {
		if r.state == "failed" || r.state == "not run" {
			f = append(f, r)
		}
	}
	return f
}

// causes are the commonest failure causes with their counts.
func (s summary) causes(n int) []struct {
	cause string
	count int
} {
	count := map[string]int{}
	example := map[string]string{}
	for _, r := range s.failed() {
		k := causeKey(r.cause)
		count[k]++
		if example[k] == "" {
			example[k] = r.cause
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	var out []struct {
		cause string
		count int
	}
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, struct {
			cause string
			count int
		}{example[k], count[k]})
	}
	return out
}

// markdown writes the summary as docs/conformance.md keeps it.
func (s summary) markdown(w io.Writer) {
	per, all := s.bySIG()
	fmt.Fprintf(w, "| | |\n| --- | --- |\n")
	fmt.Fprintf(w, "| commit | `%s` |\n| date | %s |\n| isle | %s |\n| suite | k8s.io/kubernetes %s e2e.test, kubectl %s |\n| island | %s |\n| wall time | %s |\n\n",
		s.commit, s.date.UTC().Format("2006-01-02 15:04 MST"), s.isleVersion, s.suite, s.suite, s.island, s.wall.Round(time.Second))
	fmt.Fprintf(w, "| SIG | specs | passed | failed | skipped | not run |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	rows := slices.Clone(sigs)
	for sig := range per {
		if !slices.Contains(rows, sig) {
			rows = append(rows, sig)
		}
	}
	for _, sig := range rows {
		c := per[sig]
		if c == nil {
			c = &counts{}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d |\n", sig, c.total(), c.passed, c.failed, c.skipped, c.notRun)
	}
	fmt.Fprintf(w, "| **all** | **%d** | **%d** | **%d** | **%d** | **%d** |\n\n", all.total(), all.passed, all.failed, all.skipped, all.notRun)
	for _, f := range s.suiteFailures {
		fmt.Fprintf(w, "Suite-level failure: %s\n\n", f)
	}
	if cs := s.causes(10); len(cs) > 0 {
		fmt.Fprintf(w, "Commonest failure causes:\n\n| specs | cause (one example) |\n| ---: | --- |\n")
		for _, c := range cs {
			fmt.Fprintf(w, "| %d | %s |\n", c.count, mdCell(c.cause))
		}
		fmt.Fprintln(w)
	}
	if f := s.failed(); len(f) > 0 {
		fmt.Fprintf(w, "Failing specs:\n\n| spec | cause |\n| --- | --- |\n")
		for _, r := range f {
			cause := r.cause
			if r.state == "not run" {
				cause = "not run (the pass ended before it, or it is missing from the report)"
			}
			fmt.Fprintf(w, "| %s | %s |\n", mdCell(r.name), mdCell(cause))
		}
		fmt.Fprintln(w)
	}
}

func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// Markers of the generated part of docs/conformance.md.
const (
	docBegin = "<!-- BEGIN latest run: written by make conformance -->"
	docEnd   = "<!-- END latest run -->"
)

// writeDoc puts the summary between the markers of the document at path.
func writeDoc(path string, s summary) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	before, rest, ok1 := strings.Cut(string(b), docBegin)
	_, after, ok2 := strings.Cut(rest, docEnd)
	if !ok1 || !ok2 {
		return fmt.Errorf("report: %s: want the lines %q and %q around the latest run", path, docBegin, docEnd)
	}
	var mid strings.Builder
	s.markdown(&mid)
	return os.WriteFile(path, []byte(before+docBegin+"\n\n"+mid.String()+docEnd+after), 0o644)
}

// readGinkgoLog reads a pass's results from ginkgo's own output, for a pass
// that wrote no JUnit report (a process ended before it reported): each
// failed spec is named there, with its [FAILED] line; a spec that passed
// is only a "•" in the progress lines. When the failures named and the
// bullets together count every spec of the pass, the rest passed;
// otherwise they are "not run", with why.
func readGinkgoLog(r io.Reader, specs []string) (map[string]result, error) {
	want := map[string]bool{}
	for _, s := range specs {
		want[s] = true
	}
	results := map[string]result{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	bullets, failedBlocks := 0, 0
	var current string // the failed spec whose block is being read
	for sc.Scan() {
		line := sc.Text()
		switch {
		case failedHeader.MatchString(line):
			failedBlocks++
			current = ""
			if !sc.Scan() {
				break
			}
			name := logSpecName(sc.Text())
			if want[name] {
				current = name
				results[name] = result{name: name, sig: sigOf(name), state: "failed"}
			}
		case progressLine.MatchString(line):
			bullets += strings.Count(line, "•")
		case current != "" && results[current].cause == "" && failedLine.MatchString(line) && !strings.Contains(line, "] in ["):
			res := results[current]
			res.cause = firstCause(line)
			results[current] = res
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("report: ginkgo's log: %w", err)
	}
	rest := "passed"
	why := ""
	if bullets+failedBlocks != len(specs) {
		rest, why = "not run", fmt.Sprintf("no JUnit report, and ginkgo's log shows %d of the pass's %d specs finished", bullets+failedBlocks, len(specs))
	}
	for _, s := range specs {
		if _, ok := results[s]; !ok {
			results[s] = result{name: s, sig: sigOf(s), state: rest, cause: why}
		}
	}
	return results, nil
}

var (
	// failedHeader starts the block of a spec that did not pass; the
	// spec's name is on the next line.
	failedHeader = regexp.MustCompile(`^• \[(FAILED|PANICKED|TIMEDOUT|INTERRUPTED)\]`)
	// progressLine is a line of ginkgo's progress: a "•" per spec that
	// passed and an "S" per spec skipped.
	progressLine = regexp.MustCompile(`^[•S]+$`)
	// logNode is the node a failure was in, which ginkgo's log puts in
	// the name ("[It]", "[BeforeEach]").
	logNode = regexp.MustCompile(` \[(It|BeforeEach|AfterEach|JustBeforeEach|JustAfterEach|DeferCleanup \([^)]*\))\]`)
)

// logSpecName turns a name as ginkgo's log prints it into the name
// --list-tests gives.
func logSpecName(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "]") && strings.Contains(s, ", ") {
		if i := strings.LastIndex(s, " ["); i >= 0 && strings.Contains(s[i:], ", ") {
			s = s[:i]
		}
	}
	return strings.TrimSpace(logNode.ReplaceAllString(s, ""))
}
