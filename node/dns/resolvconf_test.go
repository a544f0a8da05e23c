package dns

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const hostResolvConf = `# written by the board
; also a comment
nameserver 192.168.1.1
nameserver   fe80::1%eth0  # link-local, with a zone
nameserver not-an-ip
domain old.example
search lan home.example  bad..name
options edns0 ndots:2
options timeout:1
sortlist 130.155.160.0/255.255.240.0
garbage line
`

func TestUpstreamsFromResolvConf(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"host", hostResolvConf, []string{"192.168.1.1:53", "[fe80::1%eth0]:53"}},
		{"loopback stub kept", "nameserver 127.0.0.53\noptions edns0 trust-ad\n", []string{"127.0.0.53:53"}},
		{"first three, no duplicates", "nameserver 10.0.0.1\nnameserver 10.0.0.1\nnameserver ::1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\n",
			[]string{"10.0.0.1:53", "[::1]:53", "10.0.0.2:53"}},
		{"none", "search lan\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := UpstreamsFromResolvConf(path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if len(got) > 0 {
				if _, err := New(Config{Addrs: []string{"127.0.0.1:53"}, Upstreams: got}); err != nil {
					t.Errorf("Config does not take them: %v", err)
				}
			}
		})
	}
	if _, err := UpstreamsFromResolvConf(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v, want an error naming it", err)
	}
}

func TestPodResolvConf(t *testing.T) {
	clusterDNS := netip.MustParseAddr("10.43.0.10")
	pod := func(policy corev1.DNSPolicy, hostNetwork bool, dc *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"},
			Spec:       corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNetwork, DNSConfig: dc},
		}
	}
	const (
		cluster = "nameserver 10.43.0.10\nsearch shop.svc.cluster.local svc.cluster.local cluster.local lan home.example\noptions ndots:5\n"
		host    = "nameserver 192.168.1.1\nnameserver fe80::1%eth0\nsearch lan home.example\noptions edns0 ndots:2 timeout:1\n"
	)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		host string
		want string
	}{
		{"ClusterFirst by default", pod("", false, nil), hostResolvConf, cluster},
		{"ClusterFirst", pod(corev1.DNSClusterFirst, false, nil), hostResolvConf, cluster},
		{"ClusterFirstWithHostNet", pod(corev1.DNSClusterFirstWithHostNet, true, nil), hostResolvConf, cluster},
		{"ClusterFirst on the host network is Default", pod(corev1.DNSClusterFirst, true, nil), hostResolvConf, host},
		{"Default", pod(corev1.DNSDefault, false, nil), hostResolvConf, host},
		{"Default with an empty host file", pod(corev1.DNSDefault, false, nil), "", ""},
		{"None", pod(corev1.DNSNone, false, &corev1.PodDNSConfig{
			Nameservers: []string{"1.1.1.1"},
			Searches:    []string{"a.example"},
			Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "rotate"}},
		}), hostResolvConf, "nameserver 1.1.1.1\nsearch a.example\noptions ndots:1 rotate\n"},
		{"dnsConfig merged into ClusterFirst", pod(corev1.DNSClusterFirst, false, &corev1.PodDNSConfig{
			Nameservers: []string{"10.43.0.10", "1.1.1.1", "8.8.8.8", "9.9.9.9"},
			Searches:    []string{"lan", "b.example"},
			Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}},
		}), "search lan\n", "nameserver 10.43.0.10\nnameserver 1.1.1.1\nnameserver 8.8.8.8\n" +
			"search shop.svc.cluster.local svc.cluster.local cluster.local lan b.example\noptions ndots:2 edns0\n"},
		{"dnsConfig merged into Default", pod(corev1.DNSDefault, false, &corev1.PodDNSConfig{
			Nameservers: []string{"1.1.1.1", "8.8.8.8"},
			Options:     []corev1.PodDNSConfigOption{{Name: "timeout", Value: ptr.To("3")}},
		}), hostResolvConf, "nameserver 192.168.1.1\nnameserver fe80::1%eth0\nnameserver 1.1.1.1\n" +
			"search lan home.example\noptions edns0 ndots:2 timeout:3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodResolvConf(tc.pod, clusterDNS, "cluster.local", []byte(tc.host))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestPodResolvConfSearchLimits(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	search := func(rc []byte) []string {
		for line := range strings.Lines(string(rc)) {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "search" {
				return f[1:]
			}
		}
		return nil
	}
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%d.example", i))
	}
	rc, err := PodResolvConf(pod, netip.MustParseAddr("10.43.0.10"), "cluster.local", []byte("search "+strings.Join(many, " ")))
	if err != nil {
		t.Fatal(err)
	}
	if got := search(rc); len(got) != 32 || got[3] != "d0.example" || got[31] != "d28.example" {
		t.Errorf("40 host domains: %d kept (%q), want the first 32 of all", len(got), got)
	}

	long := func(i int) string { // 244 characters
		return fmt.Sprintf("l%d.%s.example", i, strings.Repeat("x", 50)+"."+strings.Repeat("y", 50)+"."+strings.Repeat("z", 50)+"."+strings.Repeat("w", 50)+"."+strings.Repeat("v", 30-len(fmt.Sprint(i))))
	}
	var longs []string
	for i := range 10 {
		longs = append(longs, long(i))
	}
	rc, err = PodResolvConf(pod, netip.MustParseAddr("10.43.0.10"), "cluster.local", []byte("search "+strings.Join(longs, " ")))
	if err != nil {
		t.Fatal(err)
	}
	got := search(rc)
	line := strings.Join(got, " ")
	// The cluster's three domains take 52 characters, each long one 245
	// with its space: 8 of them fit in 2048.
	if len(line) > 2048 || len(got) != 3+8 || got[len(got)-1] != long(7) {
		t.Errorf("search line of %d characters with %d domains (last %q); want at most 2048 with the first 8 long ones", len(line), len(got), got[len(got)-1])
	}

	tooLong := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + ".example"
	rc, err = PodResolvConf(pod, netip.MustParseAddr("10.43.0.10"), "cluster.local", []byte("search "+tooLong+" ok.example"))
	if err != nil {
		t.Fatal(err)
	}
	if got := search(rc); slices.Contains(got, tooLong) || !slices.Contains(got, "ok.example") {
		t.Errorf("a domain of %d characters: %q, want it dropped and the next kept", len(tooLong), got)
	}
}

func TestPodResolvConfErrors(t *testing.T) {
	base := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"}}
		edit(p)
		return p
	}
	dns := netip.MustParseAddr("10.43.0.10")
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		clusterDNS netip.Addr
		domain     string
		want       string
	}{
		{"no pod", nil, dns, "cluster.local", "no pod"},
		{"unknown policy", base(func(p *corev1.Pod) { p.Spec.DNSPolicy = "Sometimes" }), dns, "cluster.local", `dnsPolicy "Sometimes"`},
		{"no cluster DNS", base(func(*corev1.Pod) {}), netip.Addr{}, "cluster.local", "no cluster DNS address"},
		{"bad domain", base(func(*corev1.Pod) {}), dns, "Cluster Local", "cluster domain"},
		{"None without nameserver", base(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }), dns, "cluster.local", "gives no nameserver"},
		{"bad nameserver", base(func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "dns.example"}}
		}), dns, "cluster.local", `spec.dnsConfig.nameservers[1] "dns.example"`},
		{"bad search", base(func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"a b"}}
		}), dns, "cluster.local", `spec.dnsConfig.searches[0] "a b"`},
		{"bad option", base(func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: ""}}}
		}), dns, "cluster.local", "spec.dnsConfig.options[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PodResolvConf(tc.pod, tc.clusterDNS, tc.domain, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if tc.pod != nil && !strings.Contains(err.Error(), "shop/web-0") {
				t.Errorf("error %v does not name the pod", err)
			}
		})
	}
}
