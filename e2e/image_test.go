package e2e

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

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
	isl := startIsland(t, 1, 0)
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	card := flashImage(t, isl, "rpi4", "role: agent\ntoken: %s\njoin: [10.77.0.11]\nhostname: vm1\naddress: 10.77.0.30/24\n"+
		"gateway: 10.77.0.1\ndns: [10.77.0.1]\nssh-authorized-keys: ["+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))+"]\n"+
		"isle:\n  registry-mirror: [registry.island=http://10.77.0.1:5000]\n")
	lanTap(t, "vmtap0")
	booted, off := bootVM(t, card, "-M", "virt", "-cpu", "cortex-a72", "-smp", "2", "-m", "1024",
		"-append", "root=LABEL=RASPIROOT rw console=ttyAMA0 net.ifnames=0 cgroup_enable=memory",
		"-drive", "file="+card.img+",if=virtio,format=raw", "-netdev", "tap,id=n0,ifname=vmtap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0", "-serial", "file:"+card.console)
	k := isl.kubectl
	waitNodeReady(t, isl, "vm1", 5*time.Minute)
	t.Logf("vm1 Ready %v after boot", time.Since(booted).Round(time.Second))
	if arch := k.ok(t, "get", "node", "vm1", "-o", `jsonpath={.metadata.labels.kubernetes\.io/arch}`); arch != "arm64" {
		t.Errorf("vm1 arch %q", arch)
	}
	// Logged in with isle.yaml's key: the token left the FAT partition
	// for a file only root reads.
	out := sshRun(t, "10.77.0.30:22", signer, "stat -c %a /etc/isle/config.yaml; grep -c '^token: ISLE1::' /etc/isle/config.yaml; "+
		"grep -c 'ISLE1::' /boot/firmware/isle.yaml; systemctl is-active isle-agent")
	if want := "600\n1\n0\nactive\n"; out != want {
		t.Errorf("on vm1: config.yaml's mode, its token lines, isle.yaml's token lines, isle-agent:\n%q, want %q", out, want)
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
	off()
	poweredOff := time.Now()
	waitFor(t, 60*time.Second, "vm1 NotReady", func() bool {
		out, _, err := k.run("", "get", "node", "vm1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out != "True"
	})
	t.Logf("vm1 NotReady %v after power-off", time.Since(poweredOff).Round(100*time.Millisecond))
}

// sdCard is a built image with isle.yaml written on its boot partition, as
// a user flashes and edits one, and the boot files QEMU loads itself (its
// -kernel boot skips the Pi's firmware).
type sdCard struct {
	dir, img, kernel, initrd, dtb, console string
	// cmdline is cmdline.txt's kernel command line, as the Pi's firmware
	// passes it.
	cmdline string
}

// flashImage builds an image for board with the isle.yaml yaml, whose %s
// is the island's token, and grows it to 4 GiB as a card (a power of two,
// which QEMU's SD card needs).
func flashImage(t *testing.T, isl *testIsland, board, yaml string) sdCard {
	t.Helper()
	ctrtest.Require(t, "qemu-system-aarch64", "mmdebstrap", "mcopy", "mdir", "mtype", "mkfs.vfat", "sfdisk", "mke2fs")
	dir := t.TempDir()
	arm64 := filepath.Join(dir, "isle-linux-arm64")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", arm64, "../cmd/isle")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build arm64 isle: %v\n%s", err, out)
	}
	c := sdCard{dir: dir, img: filepath.Join(dir, "isle.img"), console: filepath.Join(dir, "console.log")}
	start := time.Now()
	if out, err := exec.Command(isl.bin, "image", "build", "--board", board, "--role", "agent", "--isle", arm64,
		"--out", c.img, "--no-compress").CombinedOutput(); err != nil {
		t.Fatalf("isle image build: %v\n%s", err, out)
	}
	t.Logf("image built in %v", time.Since(start).Round(time.Second))
	if err := os.Truncate(c.img, 4<<30); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(isl.dir, "pi1", "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "isle.yaml"), fmt.Appendf(nil, yaml, strings.TrimSpace(string(token))), 0o600); err != nil {
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
	part := c.img + "@@4M"
	mtools("mcopy", "-o", "-i", part, "isle.yaml", "::/isle.yaml")
	for _, f := range strings.Fields(mtools("mdir", "-b", "-i", part, "::/")) {
		switch base := strings.TrimPrefix(f, "::/"); {
		case strings.HasPrefix(base, "vmlinuz-"):
			c.kernel = filepath.Join(dir, base)
		case strings.HasPrefix(base, "initrd.img-"):
			c.initrd = filepath.Join(dir, base)
		case base == "bcm2837-rpi-3-b.dtb":
			c.dtb = filepath.Join(dir, base)
		default:
			continue
		}
		mtools("mcopy", "-n", "-i", part, f, dir)
	}
	if c.kernel == "" || c.initrd == "" || c.dtb == "" {
		t.Fatalf("the boot partition lacks a kernel, an initrd or the Pi 3's device tree:\n%s", mtools("mdir", "-b", "-i", part, "::/"))
	}
	// What QEMU does not run, the Pi's firmware, finds what it needs: the
	// boards' device trees, and a config.txt starting this kernel and
	// initrd in 64-bit mode.
	files := mtools("mdir", "-b", "-i", part, "::/")
	for _, f := range []string{"bootcode.bin", "start.elf", "start4.elf", "fixup.dat", "fixup4.dat",
		"bcm2837-rpi-3-b.dtb", "bcm2837-rpi-3-b-plus.dtb", "bcm2711-rpi-4-b.dtb", "bcm2837-rpi-zero-2-w.dtb"} {
		if !strings.Contains(files, "::/"+f+"\n") {
			t.Errorf("the boot partition has no %s", f)
		}
	}
	config := mtools("mtype", "-i", part, "::/config.txt")
	for _, l := range []string{"arm_64bit=1", "kernel=" + filepath.Base(c.kernel), "initramfs " + filepath.Base(c.initrd)} {
		if !strings.Contains(config, "\n"+l+"\n") {
			t.Errorf("config.txt has no line %q:\n%s", l, config)
		}
	}
	c.cmdline = strings.TrimSpace(mtools("mtype", "-i", part, "::/cmdline.txt"))
	for _, w := range []string{"root=LABEL=RASPIROOT", "cgroup_enable=memory"} {
		if !slices.Contains(strings.Fields(c.cmdline), w) {
			t.Errorf("cmdline.txt has no %s: %q", w, c.cmdline)
		}
	}
	return c
}

// lanTap makes a tap device on the island's LAN bridge (it goes with the
// island's LAN namespace).
func lanTap(t *testing.T, name string) {
	t.Helper()
	for _, args := range [][]string{
		{"ip", "netns", "exec", island.LANNamespace, "ip", "tuntap", "add", "dev", name, "mode", "tap"},
		{"ip", "netns", "exec", island.LANNamespace, "ip", "link", "set", name, "master", island.LANBridge, "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
}

// bootVM powers on the card in qemu-system-aarch64 (in the island's LAN
// namespace, where its taps are) with the machine arguments args. It
// returns when QEMU started, and off, which powers the VM off and returns
// once QEMU has ended; the test's end does too. On failure the test's log
// gets the tails of QEMU's output and of the console.
func bootVM(t *testing.T, c sdCard, args ...string) (booted time.Time, off func()) {
	t.Helper()
	args = append([]string{"netns", "exec", island.LANNamespace, "qemu-system-aarch64",
		"-kernel", c.kernel, "-initrd", c.initrd, "-display", "none", "-no-reboot"}, args...)
	vm := exec.Command("ip", args...) // ip netns exec execs QEMU: the process is QEMU's
	out, err := os.Create(filepath.Join(c.dir, "qemu-"+filepath.Base(c.console)))
	if err != nil {
		t.Fatal(err)
	}
	vm.Stdout, vm.Stderr = out, out
	if err := vm.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	off = func() {
		once.Do(func() {
			_ = vm.Process.Kill()
			_ = vm.Wait()
			out.Close()
		})
	}
	t.Cleanup(func() {
		off()
		if t.Failed() {
			for _, f := range []string{out.Name(), c.console} {
				b, _ := os.ReadFile(f)
				t.Logf("%s (tail):\n%s", filepath.Base(f), b[max(0, len(b)-8192):])
			}
		}
	})
	return time.Now(), off
}

// sshRun runs a shell command on a board as root over SSH, with key, and
// returns its output (the command's exit status is not checked: grep -c
// counts 0 with status 1).
func sshRun(t *testing.T, addr string, key ssh.Signer, cmd string) string {
	t.Helper()
	// sshd may start after the agent that made the Node Ready: a refused
	// connection is tried again for a minute.
	var c *ssh.Client
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		c, err = ssh.Dial("tcp", addr, &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second}) // the board's key is new: nothing to check it against
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("ssh %s: %v", addr, err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("ssh %s: %v", addr, err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil && !errors.As(err, new(*ssh.ExitError)) {
		t.Fatalf("ssh %s %q: %v\n%s", addr, cmd, err, out)
	}
	return string(out)
}

// waitNodeReady waits for the Node to be Ready; the failure lists the
// Nodes there are.
func waitNodeReady(t *testing.T, isl *testIsland, name string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(time.Second) {
		out, _, err := isl.kubectl.run("", "get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err == nil && out == "True" {
			return
		}
		if time.Now().After(deadline) {
			nodes, _, _ := isl.kubectl.run("", "get", "nodes", "-o", "wide")
			t.Fatalf("timed out after %v waiting for Node %s Ready; the Nodes:\n%s", d, name, nodes)
		}
	}
}
