package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStagingVersion(t *testing.T) {
	for in, want := range map[string]string{"v1.33.0": "v0.33.0", "v1.32.4": "v0.32.4"} {
		if got, err := stagingVersion(in); err != nil || got != want {
			t.Errorf("stagingVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"1.33.0", "v1.33", "v2.0.0", "v1.33.0-rc.1", ""} {
		if _, err := stagingVersion(bad); err == nil {
			t.Errorf("stagingVersion(%q) accepted", bad)
		}
	}
}

func TestGoMod(t *testing.T) {
	kube := `module k8s.io/kubernetes

go 1.24.0

require k8s.io/api v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/some/fork => github.com/other/fork v1.0.0
	k8s.io/api => ./staging/src/k8s.io/api
)
`
	got, err := goMod("v1.33.0", []byte(kube))
	if err != nil {
		t.Fatal(err)
	}
	want := "module isle.local/conformance\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes v1.33.0\n\nreplace (\n" +
		"\tk8s.io/api => k8s.io/api v0.33.0\n\tk8s.io/client-go => k8s.io/client-go v0.33.0\n)\n"
	if got != want {
		t.Errorf("go.mod:\n%s\nwant:\n%s", got, want)
	}
	if _, err := goMod("v1.33.0", []byte("module k8s.io/kubernetes\n")); err == nil {
		t.Error("a go.mod without staging replaces was accepted")
	}
	if !sameRequirement([]byte(strings.Replace(want, "v1.33.0\n", "v1.33.0\n\nrequire x v1 // indirect\n", 1)), want) {
		t.Error("a tidied go.mod is taken for a changed one")
	}
	if sameRequirement([]byte(strings.Replace(want, "v0.33.0", "v0.32.0", 1)), want) {
		t.Error("a go.mod with other replaces is taken for the same")
	}
}

func TestPasses(t *testing.T) {
	specs := []string{"[sig-a] x [Conformance]", "[sig-b] Namespaces [Serial] y [Conformance]", "[sig-c] z [Conformance]"}
	ps := passes(specs, 4)
	if len(ps) != 2 || ps[0].name != "parallel" || ps[0].nodes != 4 || len(ps[0].specs) != 2 ||
		ps[1].name != "serial" || ps[1].nodes != 1 || len(ps[1].specs) != 1 || ps[1].specs[0] != specs[1] {
		t.Fatalf("passes: %+v %+v", ps[0], ps[1])
	}
	if ps := passes(specs[:1], 4); len(ps) != 1 || ps[0].name != "parallel" {
		t.Errorf("no serial specs: %d passes", len(ps))
	}
	if f := focus([]string{"[sig-a] a.b (c) [Conformance]"}); f != `(?:\[sig-a\] a\.b \(c\) \[Conformance\])` {
		t.Errorf("focus: %s", f)
	}
}

func TestReadSubset(t *testing.T) {
	all := []string{"[sig-a] x [Conformance]", "[sig-b] y [Conformance]"}
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "subset.txt")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := readSubset(write("# regressions\n\n[sig-b] y [Conformance]\n  [sig-a] x [Conformance]  \n"), all)
	if err != nil || len(got) != 2 || got[0] != all[1] || got[1] != all[0] {
		t.Fatalf("readSubset: %q, %v", got, err)
	}
	if _, err := readSubset(write("[sig-a] x [Conformance]\n[sig-z] gone [Conformance]\n"), all); err == nil || !strings.Contains(err.Error(), "subset.txt:2:") {
		t.Errorf("unknown spec: %v", err)
	}
	if _, err := readSubset(write("# nothing\n"), all); err == nil {
		t.Error("an empty subset was accepted")
	}
}

// junitSample is what ginkgo writes, shortened: every spec of the suite
// is listed, those its focus left out as skipped.
const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="6" disabled="0" errors="0" failures="2" time="100">
  <testsuite name="Kubernetes e2e suite" package="/" tests="6">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[It] [sig-node] Pods should get a host IP [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" status="passed" time="4.5"></testcase>
    <testcase name="[It] [sig-apps] StatefulSet should work [Conformance]" classname="Kubernetes e2e suite" status="failed" time="0.3">
      <failure type="failed">[FAILED] the server could not find the requested resource
In [It] at: k8s.io/kubernetes@v1.33.0/test/e2e/apps/statefulset.go:925 @ 12/01/26 21:29:47.782</failure>
    </testcase>
    <testcase name="[It] [sig-network] DNS should provide DNS for the cluster [Conformance]" classname="Kubernetes e2e suite" status="timedout" time="600">
      <failure type="timedout">  STEP: Creating a pod
  [TIMEDOUT] A suite timeout occurred
</failure>
    </testcase>
    <testcase name="[It] [sig-storage] Secrets should be consumable [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped - needs two nodes"></skipped>
    </testcase>
    <testcase name="[It] [sig-storage] Other [Slow]" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>
`

func TestReadJUnitAndSummary(t *testing.T) {
	want := map[string]bool{
		"[sig-node] Pods should get a host IP [NodeConformance] [Conformance]":       true,
		"[sig-apps] StatefulSet should work [Conformance]":                           true,
		"[sig-network] DNS should provide DNS for the cluster [Conformance]":         true,
		"[sig-storage] Secrets should be consumable [NodeConformance] [Conformance]": true,
	}
	res, suiteFailures, err := readJUnit(strings.NewReader(junitSample), want)
	if err != nil {
		t.Fatal(err)
	}
	if len(suiteFailures) != 0 {
		t.Errorf("suite failures: %q", suiteFailures)
	}
	check := func(name, state, cause string) {
		t.Helper()
		r, ok := res[name]
		if !ok || r.state != state || r.cause != cause {
			t.Errorf("%s: %+v, want %s %q", name, r, state, cause)
		}
	}
	check("[sig-node] Pods should get a host IP [NodeConformance] [Conformance]", "passed", "")
	check("[sig-apps] StatefulSet should work [Conformance]", "failed", "the server could not find the requested resource")
	check("[sig-network] DNS should provide DNS for the cluster [Conformance]", "failed", "A suite timeout occurred")
	check("[sig-storage] Secrets should be consumable [NodeConformance] [Conformance]", "skipped", "needs two nodes")
	if _, ok := res["[sig-storage] Other [Slow]"]; ok {
		t.Error("a spec left out by the focus is in the results")
	}

	selected := []string{
		"[sig-apps] StatefulSet should work [Conformance]",
		"[sig-apps] StatefulSet scales [Conformance]", // in no report
		"[sig-network] DNS should provide DNS for the cluster [Conformance]",
		"[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
		"[sig-storage] Secrets should be consumable [NodeConformance] [Conformance]",
	}
	s := summary{commit: "abc1234", isleVersion: "isle test", suite: "v1.33.0", date: time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC),
		wall: 90 * time.Minute, island: "3 servers, 2 agents", results: collect(selected, []map[string]result{res})}
	per, all := s.bySIG()
	if all.total() != 5 || all.passed != 1 || all.failed != 2 || all.skipped != 1 || all.notRun != 1 {
		t.Errorf("totals: %+v", all)
	}
	if c := per["apps"]; c == nil || c.failed != 1 || c.notRun != 1 {
		t.Errorf("apps: %+v", c)
	}
	var b strings.Builder
	s.markdown(&b)
	md := b.String()
	for _, line := range []string{
		"| commit | `abc1234` |",
		"| apps | 2 | 0 | 1 | 0 | 1 |",
		"| network | 1 | 0 | 1 | 0 | 0 |",
		"| auth | 0 | 0 | 0 | 0 | 0 |",
		"| **all** | **5** | **1** | **2** | **1** | **1** |",
		"| [sig-apps] StatefulSet should work [Conformance] | the server could not find the requested resource |",
		"| [sig-apps] StatefulSet scales [Conformance] | not run",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("summary lacks %q:\n%s", line, md)
		}
	}

	doc := filepath.Join(t.TempDir(), "conformance.md")
	if err := os.WriteFile(doc, []byte("# Conformance\n\nintro\n\n"+docBegin+"\nold\n"+docEnd+"\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDoc(doc, s); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	if !strings.Contains(string(got), "intro") || !strings.Contains(string(got), "after") || strings.Contains(string(got), "old") ||
		!strings.Contains(string(got), "| **all** |") {
		t.Errorf("document:\n%s", got)
	}
	if err := os.WriteFile(doc, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDoc(doc, s); err == nil {
		t.Error("a document without markers was written")
	}
}

func TestSuiteFailure(t *testing.T) {
	j := `<testsuites><testsuite><testcase name="[SynchronizedBeforeSuite]" status="failed"><failure>[FAILED] Error waiting for all pods to be running and ready
more</failure></testcase></testsuite></testsuites>`
	_, sf, err := readJUnit(strings.NewReader(j), nil)
	if err != nil || len(sf) != 1 || sf[0] != "SynchronizedBeforeSuite: Error waiting for all pods to be running and ready" {
		t.Errorf("suite failures %q, %v", sf, err)
	}
}

func TestFirstCauseOfGomega(t *testing.T) {
	body := "  [FAILED] Expected\n      <string>: \n  to equal\n      <string>: containers with incomplete status: [init2]\n  In [It] at: k8s.io/x.go:565 @ 12/01/26\n"
	if got, want := firstCause(body), "Expected <string>: to equal <string>: containers with incomplete status: [init2]"; got != want {
		t.Errorf("firstCause = %q, want %q", got, want)
	}
}

func TestCauseKey(t *testing.T) {
	a := causeKey(`Timed out after 300.001s. pod "dns-test-1234" in namespace "dns-7428" not ready`)
	b := causeKey(`Timed out after 300.120s. pod "dns-test-99" in namespace "dns-1" not ready`)
	if a != b {
		t.Errorf("%q != %q", a, b)
	}
}

const ginkgoLogSample = `Running Suite: Kubernetes e2e suite
SSSS•SS•
------------------------------
• [FAILED] [2.206 seconds]
[sig-node] Variable Expansion [It] should allow substituting values in a container's args [NodeConformance] [Conformance] [sig-node, NodeConformance, Conformance]
k8s.io/kubernetes@v1.33.0/test/e2e/common/node/expansion.go:95
  Timeline >>
  STEP: Creating a pod @ 12/02/26 00:25:10.1
  << Timeline

  [FAILED] expected "test-value" in container output: Expected
  In [It] at: k8s.io/kubernetes@v1.33.0/test/e2e/framework/pod/output/output.go:263 @ 12/02/26 00:25:12.3
------------------------------
• [FAILED] [0.05 seconds]
[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] [BeforeEach] should honor timeout [Conformance] [sig-api-machinery, Conformance]
  [FAILED] in [BeforeEach] - k8s.io/kubernetes@v1.33.0/test/e2e/apimachinery/webhook.go:1046 @ 12/02/26 00:29:06.571
  [FAILED] creating role binding webhook-6983:webhook to access configMap: the server could not find the requested resource
------------------------------
SS•
`

func TestReadGinkgoLog(t *testing.T) {
	expansion := "[sig-node] Variable Expansion should allow substituting values in a container's args [NodeConformance] [Conformance]"
	webhook := "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should honor timeout [Conformance]"
	passed := []string{"[sig-apps] A [Conformance]", "[sig-apps] B [Conformance]", "[sig-apps] C [Conformance]"}
	specs := append([]string{expansion, webhook}, passed...)
	res, err := readGinkgoLog(strings.NewReader(ginkgoLogSample), specs)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[expansion]; r.state != "failed" || r.sig != "node" || r.cause != `expected "test-value" in container output: Expected` {
		t.Errorf("expansion: %+v", r)
	}
	if r := res[webhook]; r.state != "failed" || !strings.HasPrefix(r.cause, "creating role binding") {
		t.Errorf("webhook: %+v", r)
	}
	for _, p := range passed {
		if res[p].state != "passed" {
			t.Errorf("%s: %+v, want passed (3 bullets, 2 failures, 5 specs)", p, res[p])
		}
	}
	// One spec more than the log accounts for: nothing can be said passed.
	res, err = readGinkgoLog(strings.NewReader(ginkgoLogSample), append(specs, "[sig-apps] D [Conformance]"))
	if err != nil {
		t.Fatal(err)
	}
	if r := res[passed[0]]; r.state != "not run" || !strings.Contains(r.cause, "5 of the pass's 6 specs") {
		t.Errorf("an unfinished pass: %+v", r)
	}
	if res[expansion].state != "failed" {
		t.Errorf("a named failure is a failure still: %+v", res[expansion])
	}
}
