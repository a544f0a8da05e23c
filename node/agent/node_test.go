package agent

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/gossip"
)

// testReport is a node report of a board with facts f, whose pressure
// reads as none (the test machine's own pressure is not the test's).
func testReport(t *testing.T, cfg Config, f hw.Facts) *nodeReport {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	r, err := newNodeReport(cfg, f, "")
	if err != nil {
		t.Fatal(err)
	}
	r.read = func() (reading, error) { return healthy(f.Memory), nil }
	r.pressure, r.posted = pressure{}, pressure{}
	return r
}

// healthy is a reading of a board with memory bytes under no pressure.
func healthy(memory int64) reading {
	return reading{memoryAvailable: memory / 2, disk: hw.Filesystem{Size: 32 << 30, Available: 16 << 30}, pids: hw.PIDs{Used: 120, Max: 32768}}
}

func TestNodeLabelsTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		role   gossip.Role
		facts  hw.Facts
		want   map[string]string
		absent []string
	}{
		{
			name: "pi zero agent", role: gossip.RoleAgent, facts: hw.Facts{Arch: "arm", ARMVersion: 6},
			want: map[string]string{
				"kubernetes.io/hostname": "b1", "kubernetes.io/arch": "arm", "kubernetes.io/os": "linux",
				"beta.kubernetes.io/arch": "arm", "beta.kubernetes.io/os": "linux",
				LabelRole: "agent", LabelARMVersion: "6",
			},
			absent: []string{LabelControlPlane},
		},
		{
			name: "pi 4 server", role: gossip.RoleServer, facts: hw.Facts{Arch: "arm64", Model: "Raspberry Pi 4 Model B Rev 1.4"},
			want: map[string]string{
				"kubernetes.io/hostname": "b1", "kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux",
				"beta.kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux",
				LabelRole: "server", "node-role.kubernetes.io/control-plane": "",
				"isle.dev/board-model": "raspberry-pi-4-model-b-rev-1.4",
			},
			absent: []string{LabelARMVersion},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeLabels("b1", tc.role, tc.facts)
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("label %s: %q (present %v), want %q", k, g, ok, v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("label %s present", k)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("labels %v, want exactly %v", got, tc.want)
			}
		})
	}
}

func TestNodeResources(t *testing.T) {
	pi4 := hw.Facts{Arch: "arm64", CPUs: 4, Memory: 4 << 30}
	const storage = 32 << 30
	q := resource.MustParse
	for _, tc := range []struct {
		name          string
		cfg           Config
		capacity      corev1.ResourceList
		allocatable   corev1.ResourceList
		wantErr, also string // the error names wantErr and says also
	}{
		{
			name:        "defaults",
			capacity:    corev1.ResourceList{"cpu": q("4"), "memory": q("4Gi"), "pods": q("110"), "ephemeral-storage": q("32Gi")},
			allocatable: corev1.ResourceList{"cpu": q("4"), "memory": *resource.NewQuantity(4<<30-(4<<30)/10, resource.BinarySI), "pods": q("110"), "ephemeral-storage": q("32Gi")},
		},
		{
			name:        "reserves and max pods",
			cfg:         Config{ReservedCPU: 500, ReservedMemory: 512 << 20, ReservedStorage: 2 << 30, MaxPods: 30},
			capacity:    corev1.ResourceList{"cpu": q("4"), "memory": q("4Gi"), "pods": q("30"), "ephemeral-storage": q("32Gi")},
			allocatable: corev1.ResourceList{"cpu": q("3500m"), "memory": q("3584Mi"), "pods": q("30"), "ephemeral-storage": q("30Gi")},
		},
		{
			name:        "reserve all",
			cfg:         Config{ReservedCPU: 4000, ReservedMemory: 4 << 30, ReservedStorage: storage},
			capacity:    corev1.ResourceList{"cpu": q("4"), "memory": q("4Gi"), "pods": q("110"), "ephemeral-storage": q("32Gi")},
			allocatable: corev1.ResourceList{"cpu": q("0"), "memory": q("0"), "pods": q("110"), "ephemeral-storage": q("0")},
		},
		{name: "more CPU than the board's", cfg: Config{ReservedCPU: 4500}, wantErr: "ReservedCPU", also: "4500m is more than the board's cpu, 4"},
		{name: "more memory than the board's", cfg: Config{ReservedMemory: 5 << 30}, wantErr: "ReservedMemory", also: "5Gi is more than the board's memory, 4Gi"},
		{name: "more storage than the disk", cfg: Config{ReservedStorage: storage + 1}, wantErr: "ReservedStorage", also: "more than the board's ephemeral-storage"},
		{name: "negative CPU", cfg: Config{ReservedCPU: -1}, wantErr: "ReservedCPU", also: "negative"},
		{name: "negative memory", cfg: Config{ReservedMemory: -1}, wantErr: "ReservedMemory", also: "negative"},
		{name: "negative max pods", cfg: Config{MaxPods: -1}, wantErr: "MaxPods", also: "positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capacity, allocatable, err := nodeResources(tc.cfg, pi4, storage)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.also) {
					t.Fatalf("err %v, want one naming %s and saying %q", err, tc.wantErr, tc.also)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalResources(capacity, tc.capacity) {
				t.Errorf("capacity %v, want %v", capacity, tc.capacity)
			}
			if !equalResources(allocatable, tc.allocatable) {
				t.Errorf("allocatable %v, want %v", allocatable, tc.allocatable)
			}
		})
	}
}

func TestNewNodeReport(t *testing.T) {
	pi3 := hw.Facts{Arch: "arm", ARMVersion: 7, CPUs: 4, Memory: 1 << 30, Kernel: "6.12.34+rpt-rpi-v7", OSImage: "Raspbian GNU/Linux 12 (bookworm)",
		MachineID: "m1", BootID: "b1"}
	base := Config{Credential: wire.Credential{Name: "pi3"}, Address: "192.168.1.23", KubeVersion: "v1.32.4"}

	cfg := base
	cfg.RuntimeVersion = "containerd://1.7.35"
	r := testReport(t, cfg, pi3)
	want := corev1.NodeSystemInfo{MachineID: "m1", SystemUUID: "m1", BootID: "b1", KernelVersion: pi3.Kernel, OSImage: pi3.OSImage,
		ContainerRuntimeVersion: "containerd://1.7.35", KubeletVersion: "v1.32.4", OperatingSystem: "linux", Architecture: "arm"}
	if r.info != want {
		t.Errorf("node info %+v, want %+v", r.info, want)
	}
	st := r.status(time.Now())
	if len(st.Addresses) != 2 || st.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.1.23"}) ||
		st.Addresses[1] != (corev1.NodeAddress{Type: corev1.NodeHostName, Address: "pi3"}) {
		t.Errorf("addresses %v", st.Addresses)
	}
	// 5% of 1 GiB is below 100 MiB.
	if r.memoryThreshold != (1<<30)*5/100 {
		t.Errorf("memory threshold on a 1 GiB board %d, want 5%%", r.memoryThreshold)
	}
	if r := testReport(t, base, hw.Facts{CPUs: 4, Memory: 8 << 30}); r.memoryThreshold != 100<<20 {
		t.Errorf("memory threshold on an 8 GiB board %d, want 100 MiB", r.memoryThreshold)
	}
	cfg = base
	cfg.MemoryPressureThreshold = 200 << 20
	if r := testReport(t, cfg, pi3); r.memoryThreshold != 200<<20 {
		t.Errorf("memory threshold %d, want the configured 200 MiB", r.memoryThreshold)
	}

	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"runtime version without the runtime", func(c *Config) { c.RuntimeVersion = "1.7.35" }, "RuntimeVersion"},
		{"no data directory", func(c *Config) { c.DataDir = filepath.Join(t.TempDir(), "missing") }, "DataDir"},
		{"negative memory threshold", func(c *Config) { c.MemoryPressureThreshold = -1 }, "MemoryPressureThreshold"},
		{"memory threshold above the memory", func(c *Config) { c.MemoryPressureThreshold = 2 << 30 }, "MemoryPressureThreshold"},
		{"reserve above the memory", func(c *Config) { c.ReservedMemory = 2 << 30 }, "ReservedMemory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.DataDir = t.TempDir()
			tc.edit(&cfg)
			if _, err := newNodeReport(cfg, pi3, ""); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}
