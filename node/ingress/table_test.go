package ingress

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// buildTable builds the table of s as Update would, without a Controller.
func buildTable(t *testing.T, s Snapshot) (*table, []string) {
	t.Helper()
	return build(s, testEnv(t), newPool(), newCertCache())
}

// routeName returns the name of the backend a request goes to, "404" for
// none.
func routeName(tb *table, host, path string) string {
	b := route(tb, requestHost(host), path)
	if b == nil {
		return "404"
	}
	return b.name
}

func TestRoutePrecedence(t *testing.T) {
	s := Snapshot{
		Classes: isleClasses(),
		Ingresses: []*networkingv1.Ingress{
			// Listed newest first: the order of the Snapshot must not matter.
			newIngress("default", "newer-default", 9, defaultBackend("late-default", 80)),
			newIngress("default", "b-same-age", 7, rule("tie.example.com", path("Prefix", "/", "tie-b", 80))),
			newIngress("default", "a-same-age", 7, rule("tie.example.com", path("Prefix", "/", "tie-a", 80))),
			newIngress("default", "defaults", 6, defaultBackend("default", 80)),
			newIngress("default", "newer", 5, rule("foo.example.com",
				path("Prefix", "/a", "dup", 80),
				path("Prefix", "/dup", "dup", 80),
				path("Exact", "/a", "dup-exact", 80))),
			newIngress("default", "nohost", 3, rule("",
				path("Prefix", "/any", "any", 80),
				path("Exact", "/only-any", "only-any", 80))),
			newIngress("default", "wild", 2, rule("*.example.com",
				path("Prefix", "/", "wild", 80),
				path("Prefix", "/w", "wild-w", 80))),
			newIngress("other", "foo", 1, rule("foo.example.com",
				path("Exact", "/exact", "exact", 80),
				path("Prefix", "/exact", "exact-prefix", 80),
				path("Prefix", "/a", "a", 80),
				path("Prefix", "/a/b/", "ab", "http"),
				path("ImplementationSpecific", "/impl", "impl", 80),
				path("", "/notype", "notype", 80))),
		},
	}
	tb, problems := buildTable(t, s)
	if len(problems) > 0 {
		t.Errorf("problems: %q", problems)
	}
	for _, tc := range []struct{ host, path, want string }{
		{"foo.example.com", "/exact", "other/exact:80"},
		{"foo.example.com", "/exact/", "other/exact-prefix:80"},
		{"foo.example.com", "/exact/x", "other/exact-prefix:80"},
		{"foo.example.com", "/a", "default/dup-exact:80"}, // Exact beats Prefix, even of an older Ingress
		{"foo.example.com", "/a/", "other/a:80"},          // the older Ingress's Prefix /a wins
		{"FOO.Example.COM:8080", "/a/x", "other/a:80"},    // host without port, any case
		{"foo.example.com.", "/a/x", "other/a:80"},        // trailing dot
		{"foo.example.com", "/a/b", "other/ab:http"},      // longest prefix; rule's trailing slash ignored
		{"foo.example.com", "/a/b/", "other/ab:http"},
		{"foo.example.com", "/a/b/c", "other/ab:http"},
		{"foo.example.com", "/a/bc", "other/a:80"},      // element-wise
		{"foo.example.com", "/ab", "default/wild:80"},   // no path of the exact host: the wildcard's
		{"foo.example.com", "/impl/x", "other/impl:80"}, // ImplementationSpecific is Prefix
		{"foo.example.com", "/impl2", "default/wild:80"},
		{"foo.example.com", "/notype/y", "other/notype:80"},
		{"foo.example.com", "/dup/x", "default/dup:80"}, // a newer Ingress adds new paths
		{"bar.example.com", "/w/x", "default/wild-w:80"},
		{"bar.example.com", "/x", "default/wild:80"},
		{"a.b.example.com", "/any/1", "default/any:80"}, // a wildcard matches one label only
		{"example.com", "/any", "default/any:80"},
		{"example.com", "/w", "default/default:80"}, // no rule: the oldest default backend
		{"other.org", "/only-any", "default/only-any:80"},
		{"other.org", "/only-any/", "default/default:80"}, // Exact is exact
		{"other.org", "/anything", "default/default:80"},
		{"tie.example.com", "/", "default/tie-a:80"}, // same age: namespace/name decides
	} {
		if got := routeName(tb, tc.host, tc.path); got != tc.want {
			t.Errorf("%s%s: routed to %s, want %s", tc.host, tc.path, got, tc.want)
		}
	}
}

func TestRoutePrefixSlash(t *testing.T) {
	tb, _ := buildTable(t, Snapshot{Classes: isleClasses(), Ingresses: []*networkingv1.Ingress{
		newIngress("default", "root", 1, rule("", path("Prefix", "/", "root", 80), path("Exact", "/", "root-exact", 80))),
	}})
	for _, tc := range []struct{ path, want string }{
		{"/", "default/root-exact:80"},
		{"//", "default/root:80"},
		{"/x", "default/root:80"},
		{"/x/y/z/", "default/root:80"},
	} {
		if got := routeName(tb, "h", tc.path); got != tc.want {
			t.Errorf("%s: routed to %s, want %s", tc.path, got, tc.want)
		}
	}
}

func TestRouteNotFound(t *testing.T) {
	tb, _ := buildTable(t, Snapshot{Classes: isleClasses(), Ingresses: []*networkingv1.Ingress{
		newIngress("default", "foo", 1, rule("foo.example.com", path("Prefix", "/app", "app", 80))),
	}})
	for _, tc := range []struct{ host, path string }{
		{"foo.example.com", "/"},
		{"foo.example.com", "/application"},
		{"bar.example.com", "/app"},
		{"", "/app"},
	} {
		if got := routeName(tb, tc.host, tc.path); got != "404" {
			t.Errorf("%s%s: routed to %s, want 404", tc.host, tc.path, got)
		}
	}
	c, err := New(Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.table.Store(tb)
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://bar.example.com/app", nil))
	if rec.Code != http.StatusNotFound || rec.Body.String() != "404 page not found\n" {
		t.Errorf("got %d %q, want 404 page not found", rec.Code, rec.Body)
	}
}

func TestClassSelection(t *testing.T) {
	ings := []*networkingv1.Ingress{
		newIngress("default", "by-field", 1),
		newIngress("default", "other-class", 2, className("nginx")),
		newIngress("default", "unknown-class", 3, className("nope")),
		newIngress("default", "no-class", 4, className("")),
		newIngress("default", "legacy", 5, className(""), annotation(legacyClassAnnotation, "isle")),
		newIngress("default", "legacy-other", 6, className(""), annotation(legacyClassAnnotation, "nginx")),
		newIngress("default", "field-beats-annotation", 7, annotation(legacyClassAnnotation, "nginx")),
		newIngress("default", "second-class", 8, className("isle-internal")),
	}
	names := func(classes ...*networkingv1.IngressClass) []string {
		var out []string
		for _, ing := range servedIngresses(ings, classes) {
			out = append(out, ing.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		classes []*networkingv1.IngressClass
		want    []string
	}{
		{"isle default", isleClasses(), []string{"by-field", "no-class", "legacy", "field-beats-annotation"}},
		{"isle not default", []*networkingv1.IngressClass{newClass("isle", ControllerName, false), newClass("nginx", "k8s.io/ingress-nginx", true)},
			[]string{"by-field", "legacy", "field-beats-annotation"}},
		{"two isle classes", append(isleClasses(), newClass("isle-internal", ControllerName, false)),
			[]string{"by-field", "no-class", "legacy", "field-beats-annotation", "second-class"}},
		{"no classes", nil, nil},
	} {
		if got := names(tc.classes...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: served %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOtherClassIgnored(t *testing.T) {
	tb, _ := buildTable(t, Snapshot{Classes: isleClasses(), Ingresses: []*networkingv1.Ingress{
		newIngress("default", "nginx", 1, className("nginx"), rule("", path("Prefix", "/", "nginx", 80))),
		newIngress("default", "isle", 2, rule("", path("Prefix", "/app", "isle", 80))),
	}})
	if got := routeName(tb, "h", "/"); got != "404" {
		t.Errorf("/ routed to %s, want 404 (the older Ingress is of another class)", got)
	}
	if got := routeName(tb, "h", "/app"); got != "default/isle:80" {
		t.Errorf("/app routed to %s, want default/isle:80", got)
	}
}

func TestProblemsSkipOnlyTheBadParts(t *testing.T) {
	s := Snapshot{
		Classes: isleClasses(),
		Ingresses: []*networkingv1.Ingress{
			newIngress("default", "bad", 1,
				rule("bad_host.example.com", path("Prefix", "/", "svc", 80)),
				rule("*.*.example.com", path("Prefix", "/", "svc", 80)),
				rule("ok.example.com",
					path("Prefix", "relative", "svc", 80),
					path("Regex", "/x", "svc", 80),
					path("Exact", "", "svc", 80),
					path("Prefix", "/noport", "svc", nil),
					path("Prefix", "/good", "svc", 80)),
				tlsFor("missing", "ok.example.com")),
		},
		Services: []*corev1.Service{service("default", "svc", svcPort("", 80))},
		Slices:   []*discoveryv1.EndpointSlice{endpointSlice("default", "svc", "svc-1", "", 8080, "10.42.0.5", "fe80::1", "not-an-ip")},
	}
	tb, problems := buildTable(t, s)
	for _, want := range []string{
		`ingress default/bad: rule 0: host "bad_host.example.com"`,
		`ingress default/bad: rule 1: host "*.*.example.com"`,
		`ingress default/bad: rule 2 path 0: path "relative" of type Prefix: must start with /`,
		`ingress default/bad: rule 2 path 1: pathType "Regex"`,
		`ingress default/bad: rule 2 path 2: path "" of type Exact`,
		`ingress default/bad: rule 2 path 3: backend service "svc" names no port`,
		`ingress default/bad: tls 0: secret default/missing: not found`,
		`endpointslice default/svc-1: address "fe80::1" is not IPv4`,
		`endpointslice default/svc-1: address "not-an-ip" is not IPv4`,
	} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no problem starting %q in %q", want, problems)
		}
	}
	b := route(tb, "ok.example.com", "/good")
	if b == nil || b.name != "default/svc:80" || len(b.eps) != 1 || b.eps[0].addr != "10.42.0.5:8080" {
		t.Fatalf("/good: got %+v, want default/svc:80 with endpoint 10.42.0.5:8080", b)
	}
	if got := routeName(tb, "ok.example.com", "/noport"); got != "404" {
		t.Errorf("/noport routed to %s, want 404", got)
	}
}
