package main

import (
	"errors"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

func TestParseSteps(t *testing.T) {
	got, err := parseSteps("10:300, 50:1000,250:5000")
	if err != nil {
		t.Fatal(err)
	}
	if want := []step{{10, 300}, {50, 1000}, {250, 5000}}; !slices.Equal(got, want) {
		t.Fatalf("parseSteps = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "10", "10:x", "0:10", "10:-1", "50:100,10:300", "10:300,10:200", "251:100", "10:1001"} {
		if _, err := parseSteps(bad); err == nil {
			t.Errorf("parseSteps(%q) accepted", bad)
		}
	}
}

func TestHollowAddrs(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for i := range 250 {
		a := hollowAddr(i)
		if !a.IsLoopback() || seen[a] || a.As4()[3] == 0 || a.As4()[3] == 255 {
			t.Fatalf("hollowAddr(%d) = %v: want a new loopback host address", i, a)
		}
		for s := range 3 {
			if a.String() == serverAddr(s) {
				t.Fatalf("hollowAddr(%d) = %v is a server's", i, a)
			}
		}
		seen[a] = true
	}
}

func TestDrainEvents(t *testing.T) {
	long := `{"type":"MODIFIED","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"12","annotations":{"x":"` +
		strings.Repeat("y", 3*eventBuffer) + `"}}}` + "\n"
	for _, tc := range []struct {
		name, stream, rv, want string
		ended                  bool
	}{
		{name: "none", stream: "", rv: "5", want: "5"},
		{name: "added then bookmark", rv: "",
			stream: `{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"s","namespace":"n","uid":"u","resourceVersion":"7","annotations":{"a":"\"resourceVersion\":\"99\""}}}}` + "\n" +
				`{"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}` + "\n",
			want: "9"},
		{name: "an event longer than the buffer, then a short one", rv: "3",
			stream: long + `{"type":"DELETED","object":{"kind":"EndpointSlice","metadata":{"name":"b","resourceVersion":"13"}}}` + "\n", want: "13"},
		{name: "the long event last", rv: "3", stream: long, want: "12"},
		{name: "410", rv: "3", stream: `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Expired","code":410}}` + "\n", want: "", ended: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := drainEvents(strings.NewReader(tc.stream), tc.rv)
			if got != tc.want || errors.Is(err, errWatchEnded) != tc.ended {
				t.Fatalf("drainEvents = %q, %v; want %q, ended %v", got, err, tc.want, tc.ended)
			}
		})
	}
}

func TestListMeta(t *testing.T) {
	item := `{"kind":"Service","metadata":{"name":"s","resourceVersion":"3"}}`
	for _, tc := range []struct {
		name, list string
		want       metav1.ListMeta
	}{
		{name: "empty", list: `{"kind":"ServiceList","apiVersion":"v1","items":[],"metadata":{"resourceVersion":"8"}}` + "\n",
			want: metav1.ListMeta{ResourceVersion: "8"}},
		{name: "longer than the buffer, a page", list: `{"kind":"ServiceList","apiVersion":"v1","items":[` + strings.Repeat(item+",", 3*eventBuffer/len(item)) + item +
			`],"metadata":{"resourceVersion":"9","continue":"abc"}}` + "\n",
			want: metav1.ListMeta{ResourceVersion: "9", Continue: "abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listMeta(iotest.HalfReader(strings.NewReader(tc.list)))
			if err != nil || got.ResourceVersion != tc.want.ResourceVersion || got.Continue != tc.want.Continue {
				t.Fatalf("listMeta = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := listMeta(strings.NewReader(`{"kind":"Status"}`)); err == nil {
		t.Fatal("listMeta of a Status: no error")
	}
}

// TestReportJudgesMemoryAtItsSize: a memory target is judged at its own
// size only; a run that stopped short of 250 boards says the 256 MiB
// target was not measured instead of judging it by a smaller size.
func TestReportJudgesMemoryAtItsSize(t *testing.T) {
	at := func(boards, pods int, rss uint64) result {
		r := result{step: step{boards: boards}, deployments: pods / replicasPer}
		for i := range r.servers {
			r.servers[i].rss = rss
		}
		return r
	}
	var b strings.Builder
	report(&b, benchkit.Env{}, []result{at(10, 300, 100*mib), at(100, 2000, 200*mib)}, finalResults{})
	line := func(prefix string) string {
		for l := range strings.Lines(b.String()) {
			if strings.HasPrefix(l, "| "+prefix) {
				return l
			}
		}
		t.Fatalf("no line %q in the report:\n%s", prefix, b.String())
		return ""
	}
	for prefix, want := range map[string][]string{
		"server RSS at 10 boards, 300 pods":   {"100.0 MiB", "≤ 64 MiB", "MISSED"},
		"server RSS at 100 boards, 2000 pods": {"200.0 MiB"},
		"server RSS at 250 boards, 5000 pods": {"n/a", "≤ 256 MiB"},
	} {
		l := line(prefix)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("%q lacks %q", l, w)
			}
		}
		if prefix != "server RSS at 10 boards, 300 pods" && (strings.Contains(l, "holds") || strings.Contains(l, "MISSED")) {
			t.Errorf("%q is judged; want no verdict at a size the target is not for", l)
		}
	}
}

// With two sizes of the same boards, the heap per stored pod is judged on
// the pods they differ by alone, and the growth's slope is shown beside it.
func TestReportHeapPerPodAtSameBoards(t *testing.T) {
	at := func(boards, pods int, live uint64) result {
		r := result{step: step{boards: boards}, deployments: pods / replicasPer}
		r.servers[r.leader].live = live
		return r
	}
	var b strings.Builder
	report(&b, benchkit.Env{}, []result{at(10, 300, 20*mib), at(100, 1000, 60*mib), at(100, 2000, 80*mib)}, finalResults{})
	out := b.String()
	for _, want := range []string{
		`(?m)^\| the leader's live heap per stored pod \(at 100 boards, 1000 to 2000 pods\) +\| 20\.5 KiB +\| ≤ 20 KiB +\| MISSED +\|$`,
		`(?m)^\| the leader's live heap per pod added with boards \(slope of the growth\) +\| 36\.1 KiB +\| +\| +\|$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the report lacks %s:\n%s", want, out)
		}
	}
}

// A size that adds no boards shows no join time, one that adds no pods no
// placement rate nor bytes per pod: dashes, not zeros.
func TestReportSizesThatAddNothing(t *testing.T) {
	var b strings.Builder
	rs := []result{{step: step{boards: 10}, deployments: 300 / replicasPer, newPods: 300, joined: time.Second, bound: time.Second, running: 2 * time.Second, writtenPerPod: 1000},
		{step: step{boards: 100}, deployments: 300 / replicasPer, joined: 5 * time.Second},
		{step: step{boards: 100}, deployments: 600 / replicasPer, newPods: 300, bound: 2 * time.Second, running: 3 * time.Second, writtenPerPod: 900}}
	report(&b, benchkit.Env{}, rs, finalResults{})
	for _, want := range []string{
		`(?m)^\| 10 \| 300 \| 1\.0 s \| 300 \| 2\.0 s \|.*\| 1,000 B \|`,
		`(?m)^\| 100 \| 300 \| 5\.0 s \| – \| – \|.*\| – \|`,
		`(?m)^\| 100 \| 600 \| – \| 150 \| 3\.0 s \|.*\| 900 B \|`,
	} {
		if !regexp.MustCompile(want).MatchString(b.String()) {
			t.Errorf("the report lacks %s:\n%s", want, b.String())
		}
	}
}
