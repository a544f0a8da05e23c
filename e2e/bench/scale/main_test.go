package main

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
