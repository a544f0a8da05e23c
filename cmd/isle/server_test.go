package main

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/spf13/pflag"

	"github.com/isle-cluster/isle/control/cluster"
)

func TestServerFlagsValidate(t *testing.T) {
	ok := func() serverFlags {
		return serverFlags{init: true, name: "pi1", address: "10.0.0.1", apiPort: 6443, raftPort: 6445, gossipPort: 7946, nodeGrace: 40 * time.Second, memLimit: "40Mi",
			backups: cluster.BackupSchedule{Interval: 12 * time.Hour, Keep: 5}, node: defaultNodeFlags()}
	}
	cases := []struct {
		name   string
		change func(*serverFlags)
		want   string // substring of the error; "" for none
	}{
		{"init", func(*serverFlags) {}, ""},
		{"both init and join", func(f *serverFlags) { f.join = []string{"10.0.0.2"}; f.token = "x" }, "not both"},
		{"join without token", func(f *serverFlags) { f.init = false; f.join = []string{"10.0.0.2:7946"} }, "--token"},
		{"join with a bad port", func(f *serverFlags) { f.init = false; f.token = "x"; f.join = []string{"10.0.0.2:gossip"} }, "port"},
		{"join with a URL", func(f *serverFlags) { f.init = false; f.token = "x"; f.join = []string{"https://10.0.0.2/"} }, "--join"},
		{"gossip port out of range", func(f *serverFlags) { f.gossipPort = 0 }, "--gossip-port"},
		{"remove dead too soon", func(f *serverFlags) { f.removeDeadAfter = time.Second }, "--remove-dead-after"},
		{"certificates of a second", func(f *serverFlags) { f.certValidity = time.Second }, "--cert-validity"},
		{"remove dead after a minute", func(f *serverFlags) { f.removeDeadAfter = time.Minute }, ""},
		{"wildcard address", func(f *serverFlags) { f.address = "0.0.0.0" }, "--address"},
		{"not an address", func(f *serverFlags) { f.address = "pi1.local" }, "--address"},
		{"port out of range", func(f *serverFlags) { f.apiPort = 70000 }, "--api-port"},
		{"same ports", func(f *serverFlags) { f.raftPort = 6443 }, "two ports"},
		{"metrics port zero", func(f *serverFlags) { f.metricsAddr = "127.0.0.1:0" }, "--metrics-addr"},
		{"metrics on loopback", func(f *serverFlags) { f.metricsAddr = "127.0.0.1:10249" }, ""},
		{"relative admin socket", func(f *serverFlags) { f.adminSocket = "admin.sock" }, "--admin-socket"},
		{"the old store address, ignored", func(f *serverFlags) { f.storeAddr = "127.0.0.1:6444" }, ""},
		{"memory limit off", func(f *serverFlags) { f.memLimit = "0" }, ""},
		{"memory limit auto", func(f *serverFlags) { f.memLimit = "auto" }, ""},
		{"memory limit of another word", func(f *serverFlags) { f.memLimit = "half" }, "--memory-limit"},
		{"memory limit not a size", func(f *serverFlags) { f.memLimit = "lots" }, "--memory-limit"},
		{"negative memory limit", func(f *serverFlags) { f.memLimit = "-1Mi" }, "--memory-limit"},
		{"no pods", func(f *serverFlags) { f.node.containerd = "none" }, ""},
		{"containerd not a path", func(f *serverFlags) { f.node.containerd = "containerd.sock" }, "--containerd"},
		{"stream port out of range", func(f *serverFlags) { f.node.streamPort = 0 }, "--stream-port"},
		{"resync too often", func(f *serverFlags) { f.node.podResync = time.Millisecond }, "--pod-resync"},
		{"reserve not a size", func(f *serverFlags) { f.node.reservedMem = "much" }, "--reserved-memory"},
		{"negative CPU reserve", func(f *serverFlags) { f.node.reservedCPU = "-1" }, "--reserved-cpu"},
		{"relative run dir", func(f *serverFlags) { f.node.runDir = "run" }, "--run-dir"},
		{"registry mirror", func(f *serverFlags) { f.node.mirrors = []string{"registry.lan=http://10.0.0.9:5000"} }, ""},
		{"mirror without endpoint", func(f *serverFlags) { f.node.mirrors = []string{"registry.lan"} }, "--registry-mirror"},
		{"mirror of a path", func(f *serverFlags) { f.node.mirrors = []string{"registry.lan=http://10.0.0.9:5000/v2"} }, "endpoint"},
		{"mirror not http", func(f *serverFlags) { f.node.mirrors = []string{"registry.lan=ftp://10.0.0.9"} }, "endpoint"},
		{"insecure registry", func(f *serverFlags) { f.node.insecure = []string{"10.0.0.9:5000"} }, ""},
		{"insecure registry as a URL", func(f *serverFlags) { f.node.insecure = []string{"http://10.0.0.9:5000"} }, "--insecure-registry"},
		{"relative cgroup parent", func(f *serverFlags) { f.node.cgroupParent = "isle" }, "--cgroup-parent"},
		{"root cgroup parent", func(f *serverFlags) { f.node.cgroupParent = "/" }, "--cgroup-parent"},
		{"cluster CIDR too small", func(f *serverFlags) { f.node.clusterCIDR = "10.42.0.0/24" }, "--cluster-cidr"},
		{"cluster CIDR not masked", func(f *serverFlags) { f.node.clusterCIDR = "10.42.1.0/16" }, "--cluster-cidr"},
		{"cluster CIDR of IPv6", func(f *serverFlags) { f.node.clusterCIDR = "fd00::/64" }, "--cluster-cidr"},
		{"cluster DNS not an address", func(f *serverFlags) { f.node.clusterDNS = "dns" }, "--cluster-dns"},
		{"cluster domain with a space", func(f *serverFlags) { f.node.domain = "my cluster" }, "--cluster-domain"},
		{"relative resolv.conf", func(f *serverFlags) { f.node.resolvConf = "resolv.conf" }, "--resolv-conf"},
		{"ingress without a port", func(f *serverFlags) { f.node.ingressHTTP = "10.0.0.1" }, "--ingress-http"},
		{"ingress TLS without a port", func(f *serverFlags) { f.node.ingressHTTPS = "443" }, "--ingress-https"},
		{"no ingress", func(f *serverFlags) { f.node.ingressHTTP, f.node.ingressHTTPS = "none", "443" }, ""},
		{"scheduled backups", func(f *serverFlags) { f.backups.Dir = "/media/usb" }, ""},
		{"backups too often", func(f *serverFlags) { f.backups.Interval = time.Millisecond }, "--snapshot-interval"},
		{"no backups kept", func(f *serverFlags) { f.backups.Keep = 0 }, "--snapshot-keep"},
		{"force a new cluster", func(f *serverFlags) { f.init = false; f.forceNewCluster = true }, ""},
		{"force a new cluster on the first server's command line", func(f *serverFlags) { f.forceNewCluster = true }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := ok()
			tc.change(&f)
			err := f.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := runtime.GOOS + "/" + runtime.GOARCH
	if !strings.HasPrefix(out.String(), "isle ") || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "release "+wire.Release) {
		t.Fatalf("version printed %q, want isle ... release %s ... %s", out.String(), wire.Release, want)
	}
}

// defaultNodeFlags are the node flags as the command line's defaults set them.
// The LED flags take the LED specs of hw/led, and say what is wrong.
func TestLEDFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // substring of the error; "" for none
	}{
		{[]string{"--led-ready", "gpio17", "--led-activity", "gpio27:active-low"}, ""},
		{[]string{"--led-ready", "sysfs:ACT", "--led-activity", "none"}, ""},
		{[]string{"--led-ready", "virtual"}, ""},
		{[]string{"--led-ready", "gpio"}, "led-ready"},
		{[]string{"--led-activity", "sysfs:../../etc"}, "led-activity"},
		{[]string{"--led-ready", "blinkenlights"}, "led-ready"},
	} {
		var f nodeFlags
		fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fl.SetOutput(io.Discard)
		f.add(fl)
		err := fl.Parse(tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want an error about %s", tc.args, err, tc.want)
		}
	}
}

func defaultNodeFlags() nodeFlags {
	var f nodeFlags
	f.add(pflag.NewFlagSet("test", pflag.PanicOnError))
	return f
}

func TestInMemory(t *testing.T) {
	if ok, err := inMemory("/dev/shm"); err != nil || !ok {
		t.Errorf("/dev/shm: in memory %v, %v; want true", ok, err)
	}
	if ok, err := inMemory("/proc"); err != nil || ok {
		t.Errorf("/proc: in memory %v, %v; want false", ok, err)
	}
	if _, err := inMemory("/no/such/dir"); err == nil || !strings.Contains(err.Error(), "/no/such/dir") {
		t.Errorf("a missing directory: %v, want an error naming it", err)
	}
}

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		board int64
		want  int64
	}{{"auto", 1 << 30, 256 << 20}, {"auto", 512 << 20, 128 << 20}, {"0", 1 << 30, 0}, {"48Mi", 1 << 30, 48 << 20}} {
		got, err := memoryLimit(tc.flag, tc.board)
		if err != nil || got != tc.want {
			t.Errorf("memoryLimit(%q, %d) = %d, %v; want %d", tc.flag, tc.board, got, err, tc.want)
		}
	}
	if _, err := memoryLimit("-1Mi", 1<<30); err == nil {
		t.Error("a negative limit accepted")
	}
}
