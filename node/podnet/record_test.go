package podnet

import (
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestVethName(t *testing.T) {
	a, b := vethName("0b9a4c2e-1111-4d8e-9d3a-7c1f6f0e0a01"), vethName("0b9a4c2e-1111-4d8e-9d3a-7c1f6f0e0a02")
	if len(a) > 15 || !strings.HasPrefix(a, "veth") || len(a) != 12 {
		t.Errorf("vethName = %q; want veth and 8 hex digits", a)
	}
	if a == b {
		t.Errorf("two UIDs give the same veth %s", a)
	}
	if a != vethName("0b9a4c2e-1111-4d8e-9d3a-7c1f6f0e0a01") {
		t.Error("vethName is not stable")
	}
}

func portsPod(ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}}}
}

func TestHostPortsOf(t *testing.T) {
	got, err := hostPortsOf(portsPod(
		corev1.ContainerPort{ContainerPort: 80},                 // no hostPort: not mapped
		corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}, // TCP by default
		corev1.ContainerPort{ContainerPort: 53, HostPort: 8080, Protocol: corev1.ProtocolUDP},
		corev1.ContainerPort{ContainerPort: 81, HostPort: 8081, HostIP: "0.0.0.0"},
		corev1.ContainerPort{ContainerPort: 82, HostPort: 8082, HostIP: "192.168.1.10"},
		corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}, // the same again
	))
	if err != nil {
		t.Fatal(err)
	}
	want := []hostPort{
		{Protocol: corev1.ProtocolTCP, HostPort: 8080, ContainerPort: 80},
		{Protocol: corev1.ProtocolUDP, HostPort: 8080, ContainerPort: 53},
		{Protocol: corev1.ProtocolTCP, HostPort: 8081, ContainerPort: 81},
		{Protocol: corev1.ProtocolTCP, HostPort: 8082, ContainerPort: 82, HostIP: netip.MustParseAddr("192.168.1.10")},
	}
	if len(got) != len(want) {
		t.Fatalf("hostPortsOf = %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("port %d: %+v; want %+v", i, got[i], want[i])
		}
	}

	for name, tc := range map[string]struct {
		port corev1.ContainerPort
		want string
	}{
		"sctp":       {corev1.ContainerPort{ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolSCTP}, "not supported"},
		"big port":   {corev1.ContainerPort{ContainerPort: 80, HostPort: 70000}, "1..65535"},
		"no target":  {corev1.ContainerPort{HostPort: 80}, "containerPort 0"},
		"bad hostIP": {corev1.ContainerPort{ContainerPort: 80, HostPort: 80, HostIP: "board"}, "hostIP"},
		"v6 hostIP":  {corev1.ContainerPort{ContainerPort: 80, HostPort: 80, HostIP: "::1"}, "hostIP"},
	} {
		if _, err := hostPortsOf(portsPod(tc.port)); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `container "c"`) {
			t.Errorf("%s: hostPortsOf = %v; want an error naming the container and %q", name, err, tc.want)
		}
	}
	_, err = hostPortsOf(portsPod(
		corev1.ContainerPort{ContainerPort: 80, HostPort: 8080},
		corev1.ContainerPort{ContainerPort: 81, HostPort: 8080}))
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("one hostPort to two ports: %v; want an error", err)
	}
}

func TestConflict(t *testing.T) {
	ip := netip.MustParseAddr
	tcp := func(port uint16, host string) hostPort {
		hp := hostPort{Protocol: corev1.ProtocolTCP, HostPort: port, ContainerPort: 80}
		if host != "" {
			hp.HostIP = ip(host)
		}
		return hp
	}
	records := map[types.UID]*record{
		"a": {UID: "a", Namespace: "default", Name: "web", HostPorts: []hostPort{tcp(8080, "")}},
		"b": {UID: "b", Namespace: "default", Name: "api", HostPorts: []hostPort{tcp(9090, "192.168.1.10")}},
	}
	for _, tc := range []struct {
		name  string
		uid   types.UID
		ports []hostPort
		want  string
	}{
		{"same port, any address", "c", []hostPort{tcp(8080, "")}, "default/web"},
		{"same port, one address vs any", "c", []hostPort{tcp(8080, "192.168.1.10")}, "default/web"},
		{"any vs one address", "c", []hostPort{tcp(9090, "")}, "default/api"},
		{"other address", "c", []hostPort{tcp(9090, "192.168.1.11")}, ""},
		{"other protocol", "c", []hostPort{{Protocol: corev1.ProtocolUDP, HostPort: 8080, ContainerPort: 53}}, ""},
		{"its own", "a", []hostPort{tcp(8080, "")}, ""},
	} {
		err := conflict(tc.uid, tc.ports, records)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: conflict = %v; want %q", tc.name, err, tc.want)
		}
	}
}

func quietStore(t *testing.T) store {
	return store{dir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestStoreRoundTrip(t *testing.T) {
	s := quietStore(t)
	r := &record{UID: "u-1", Namespace: "default", Name: "web", IP: netip.MustParseAddr("10.42.3.7"), Netns: "/run/isle/netns/u-1",
		HostPorts: []hostPort{{Protocol: corev1.ProtocolUDP, HostIP: netip.MustParseAddr("192.168.1.10"), HostPort: 53, ContainerPort: 5353}}}
	if err := s.put(r); err != nil {
		t.Fatal(err)
	}
	if err := s.putLast(r.IP); err != nil {
		t.Fatal(err)
	}
	recs, last, err := s.load(DefaultClusterCIDR)
	if err != nil {
		t.Fatal(err)
	}
	got := recs["u-1"]
	if len(recs) != 1 || got == nil || got.IP != r.IP || got.Netns != r.Netns || len(got.HostPorts) != 1 || got.HostPorts[0] != r.HostPorts[0] {
		t.Fatalf("load = %+v; want %+v", recs, r)
	}
	if last != r.IP {
		t.Errorf("last = %v; want %v", last, r.IP)
	}
	if err := s.remove("u-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("u-1"); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if recs, _, err := s.load(DefaultClusterCIDR); err != nil || len(recs) != 0 {
		t.Errorf("after remove: %v, %v", recs, err)
	}
}

func TestStoreLoadCrashLeftovers(t *testing.T) {
	s := quietStore(t)
	for _, name := range []string{".pod-u-1.json.123.tmp", ".last.9.tmp"} {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(`{"uid":`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.load(DefaultClusterCIDR); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(s.dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestStoreLoadRejects(t *testing.T) {
	good := `{"uid":"u-1","namespace":"default","name":"web","ip":"10.42.3.7","netns":"/run/isle/netns/u-1"}`
	for name, tc := range map[string]struct {
		file, data, want string
	}{
		"garbage":        {"pod-u-1.json", "\x00\x01nope", "pod-u-1.json"},
		"empty":          {"pod-u-1.json", "", "empty"},
		"torn":           {"pod-u-1.json", good[:40], "unexpected EOF"},
		"unknown field":  {"pod-u-1.json", strings.Replace(good, `"name"`, `"nam"`, 1), "unknown field"},
		"other pod's":    {"pod-u-2.json", good, "holds pod UID u-1"},
		"outside":        {"pod-u-1.json", strings.Replace(good, "10.42.3.7", "192.168.1.7", 1), "inside the cluster CIDR"},
		"bad ip":         {"pod-u-1.json", strings.Replace(good, "10.42.3.7", "ten", 1), "pod-u-1.json"},
		"relative netns": {"pod-u-1.json", strings.Replace(good, "/run/isle/netns/u-1", "netns/u-1", 1), "network namespace path"},
		"bad uid":        {"pod-...json", strings.Replace(good, "u-1", "..", 1), "pod UID"},
		"bad hostPort":   {"pod-u-1.json", strings.Replace(good, `}`, `,"hostPorts":[{"protocol":"SCTP","hostPort":1,"containerPort":1}]}`, 1), "bad hostPort"},
		"bad last":       {"last", "10.42.3", "last"},
	} {
		t.Run(name, func(t *testing.T) {
			s := quietStore(t)
			path := filepath.Join(s.dir, tc.file)
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := s.load(DefaultClusterCIDR)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("load = %v; want an error naming %s and %q", err, path, tc.want)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the bad file is gone: %v", err)
			}
		})
	}

	s := quietStore(t)
	for _, uid := range []string{"u-1", "u-2"} {
		data := strings.ReplaceAll(good, "u-1", uid)
		if err := os.WriteFile(filepath.Join(s.dir, "pod-"+uid+".json"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.load(DefaultClusterCIDR); err == nil || !strings.Contains(err.Error(), "the same address") {
		t.Errorf("two records of one address: %v; want an error", err)
	}
}
