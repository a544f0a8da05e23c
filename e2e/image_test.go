package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/containers/ctrtest"
	"github.com/isle-cluster/isle/node/island"
)

// TestImageBootsAndJoins builds an SD-card image (its root filesystem
// cached in /var/cache/isle-image between runs), boots it under
// qemu-system-aarch64 -M virt (the image's own kernel and initrd, root on
// the image) with its network on the island's LAN through a tap, and checks
// what a flashed board does: its first boot reads isle.yaml, it joins the
// island with the token as an arm64 Node, runs an arm64 pod pulled from the
// island's registry that answers HTTP across the island, and its Node goes
// NotReady when it is powered off.
func TestImageBootsAndJoins(t *testing.T) {
	ctrtest.Require(t, "qemu-system-aarch64", "mmdebstrap", "mcopy", "mdir", "mkfs.vfat", "sfdisk", "mke2fs")
	isl := startIsland(t, 1, 0)
	dir := t.TempDir()
	arm64 := filepath.Join(dir, "isle-linux-arm64")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", arm64, "../cmd/isle")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build arm64 isle: %v\n%s", err, out)
	}
	img := filepath.Join(dir, "isle.img")
	start := time.Now()
	if out, err := exec.Command(isl.bin, "image", "build", "--board", "rpi4", "--role", "agent", "--isle", arm64,
		"--out", img, "--no-compress").CombinedOutput(); err != nil {
		t.Fatalf("isle image build: %v\n%s", err, out)
	}
	t.Logf("image built in %v", time.Since(start).Round(time.Second))
	if err := os.Truncate(img, 4<<30); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(isl.dir, "pi1", "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("role: agent\ntoken: %s\njoin: [10.77.0.11]\nhostname: vm1\naddress: 10.77.0.30/24\n"+
		"gateway: 10.77.0.1\ndns: [10.77.0.1]\nisle:\n  registry-mirror: [registry.island=http://10.77.0.1:5000]\n",
		strings.TrimSpace(string(token)))
	if err := os.WriteFile(filepath.Join(dir, "isle.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	mtools := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	part := img + "@@4M"
	mtools("mcopy", "-o", "-i", part, "isle.yaml", "::/isle.yaml")
	var kernel, initrd string
	for _, f := range strings.Fields(mtools("mdir", "-b", "-i", part, "::/")) {
		switch base := strings.TrimPrefix(f, "::/"); {
		case strings.HasPrefix(base, "vmlinuz-"):
			kernel = base
		case strings.HasPrefix(base, "initrd.img-"):
			initrd = base
		}
	}
	mtools("mcopy", "-n", "-i", part, "::/"+kernel, "vmlinuz")
	mtools("mcopy", "-n", "-i", part, "::/"+initrd, "initrd")

	for _, args := range [][]string{
		{"ip", "netns", "exec", island.LANNamespace, "ip", "tuntap", "add", "dev", "vmtap0", "mode", "tap"},
		{"ip", "netns", "exec", island.LANNamespace, "ip", "link", "set", "vmtap0", "master", island.LANBridge, "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	console, err := os.Create(filepath.Join(dir, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()
	ctx, cancel := context.WithCancel(context.Background())
	vm := exec.CommandContext(ctx, "ip", "netns", "exec", island.LANNamespace, "qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a72",
		"-smp", "2", "-m", "1024", "-nographic", "-kernel", filepath.Join(dir, "vmlinuz"), "-initrd", filepath.Join(dir, "initrd"),
		"-append", "root=LABEL=RASPIROOT rw console=ttyAMA0 net.ifnames=0 cgroup_enable=memory",
		"-drive", "file="+img+",if=virtio,format=raw", "-netdev", "tap,id=n0,ifname=vmtap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0", "-no-reboot")
	vm.Stdout, vm.Stderr = console, console
	if err := vm.Start(); err != nil {
		t.Fatal(err)
	}
	booted := time.Now()
	t.Cleanup(func() {
		cancel()
		_ = vm.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(console.Name())
			t.Logf("console (tail):\n%s", b[max(0, len(b)-8192):])
		}
	})
	k := isl.kubectl
	waitFor(t, 5*time.Minute, "vm1 Ready", func() bool {
		out, _, err := k.run("", "get", "node", "vm1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out == "True"
	})
	t.Logf("vm1 Ready %v after boot", time.Since(booted).Round(time.Second))
	if arch := k.ok(t, "get", "node", "vm1", "-o", `jsonpath={.metadata.labels.kubernetes\.io/arch}`); arch != "arm64" {
		t.Errorf("vm1 arch %q", arch)
	}
	if out, err := exec.Command("go", "run", "../deploy/hello/mkimage", "-platforms", "linux/arm64",
		"-push", isl.state.RegistryAddr()+"/isle/hello-arm:1.0").CombinedOutput(); err != nil {
		t.Fatalf("arm64 hello image: %v\n%s", err, out)
	}
	isl.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: hello-vm}
spec:
  nodeSelector: {kubernetes.io/hostname: vm1}
  containers:
  - {name: hello, image: registry.island/isle/hello-arm:1.0}
`)
	p := isl.waitRunning(t, 5*time.Minute, "hello-vm")["hello-vm"]
	// Running is not yet listening: the emulated board starts the server
	// a moment later, and pi1 learns the route to vm1's pods by gossip.
	waitFor(t, 60*time.Second, "an HTTP answer from the pod on vm1, across the island", func() bool {
		out, err := exec.Command("ip", "netns", "exec", "isle-pi1", "curl", "-s", "-m", "5", "http://"+p.Status.PodIP+":8080/hello").Output()
		return err == nil && strings.Contains(string(out), "hello from hello-vm")
	})
	cancel()
	off := time.Now()
	waitFor(t, 60*time.Second, "vm1 NotReady", func() bool {
		out, _, err := k.run("", "get", "node", "vm1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out != "True"
	})
	t.Logf("vm1 NotReady %v after power-off", time.Since(off).Round(100*time.Millisecond))
}
