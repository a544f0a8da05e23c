package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
)

// How long the bench waits for a VM's Node to change, and for its pod.
const (
	readyTimeout    = 6 * time.Minute
	notReadyTimeout = 3 * time.Minute
	podTimeout      = 5 * time.Minute
	pollEvery       = 500 * time.Millisecond
)

// cardSize is what the card is grown to, as a flashed 4 GB card.
const cardSize = 4 << 30

// metricsPort is the port of the VM's isle's /metrics.
const metricsPort = 9100

// qemuArgs are the VM's machine, after QEMU's -kernel and -initrd.
var qemuArgs = []string{"-M", "virt", "-cpu", "cortex-a72", "-smp", "2", "-m", "1024", "-display", "none", "-no-reboot",
	"-append", "root=LABEL=RASPIROOT rw console=ttyAMA0 net.ifnames=0 cgroup_enable=memory"}

// vm is the board of one trial: a copy of the image with its own isle.yaml.
type vm struct {
	name   string     // its hostname and Node
	addr   netip.Addr // on the island's LAN
	tap    string     // its tap on the LAN bridge
	dir    string     // its files
	img    string     // its card
	kernel string     // vmlinuz-*, off the card's FAT partition
	initrd string     // initrd.img-*, likewise
	key    ssh.Signer // logs in as root: isle.yaml's ssh-authorized-keys
}

// newVM names the board of trial i (1, 2, ...) on the island st.
func newVM(st *island.State, dir string, i int) (*vm, error) {
	addr, err := vmAddr(st.LAN, i)
	if err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("ssh key: %w", err)
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("ssh key: %w", err)
	}
	name := "vm" + strconv.Itoa(i)
	d := filepath.Join(dir, name)
	return &vm{name: name, addr: addr, tap: "benchtap" + strconv.Itoa(i), dir: d, img: filepath.Join(d, "card.img"), key: key}, nil
}

// vmAddr is the address of trial i's board on the LAN: .40+i.
func vmAddr(lan netip.Prefix, i int) (netip.Addr, error) {
	if !lan.Addr().Is4() || lan.Bits() > 24 {
		return netip.Addr{}, fmt.Errorf("island LAN %v: want an IPv4 /24 or wider", lan)
	}
	a := lan.Masked().Addr().As4()
	a[3] = byte(40 + i)
	return netip.AddrFrom4(a), nil
}

// cardConfig is the isle.yaml of trial i's board v on the island st: a
// static address on the LAN, the first server to join, the host as router,
// DNS server and registry mirror, isle's /metrics on the LAN, and v's key
// for SSH.
func cardConfig(st *island.State, v *vm, token string) (string, error) {
	if len(st.Boards) == 0 || st.Boards[0].Role != island.RoleServer {
		return "", fmt.Errorf("island %s: want a server as its first board", st.Dir)
	}
	if _, err := wire.ParseToken(token); err != nil {
		return "", fmt.Errorf("island %s: the cluster token: %w", st.Dir, err)
	}
	return fmt.Sprintf(`role: %s
token: %s
join: [%s]
hostname: %s
address: %s
gateway: %s
dns: [%s]
ssh-authorized-keys: [%s]
isle:
  registry-mirror: [%s=http://%s]
  metrics-addr: %s
`, role, token, st.Boards[0].Addr, v.name, netip.PrefixFrom(v.addr, st.LAN.Bits()), st.Host, st.Host,
		strings.TrimSpace(string(ssh.MarshalAuthorizedKey(v.key.PublicKey()))),
		island.RegistryHost, st.RegistryAddr(), v.metricsAddr()), nil
}

// metricsAddr is where the board's isle serves /metrics.
func (v *vm) metricsAddr() string { return netip.AddrPortFrom(v.addr, metricsPort).String() }

// flash makes v's card: a sparse copy of raw grown to cardSize, isle.yaml
// on its FAT partition, and the kernel and initrd copied out for QEMU's
// -kernel boot (which skips the Pi's firmware).
func (v *vm) flash(ctx context.Context, raw, config string) error {
	if err := os.MkdirAll(v.dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	if out, err := exec.CommandContext(ctx, "cp", "--sparse=always", raw, v.img).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: copy the image: %w: %s", v.name, err, out)
	}
	if err := os.Truncate(v.img, cardSize); err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	yaml := filepath.Join(v.dir, "isle.yaml")
	if err := os.WriteFile(yaml, []byte(config), 0o600); err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	part := v.img + "@@4M" // the FAT partition starts at 4 MiB (disk.Layout)
	if _, err := mtools(ctx, "mcopy", "-o", "-i", part, yaml, "::/isle.yaml"); err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	list, err := mtools(ctx, "mdir", "-b", "-i", part, "::/")
	if err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	kernel, initrd, err := bootFiles(list)
	if err != nil {
		return fmt.Errorf("%s: the card's FAT partition: %w", v.name, err)
	}
	v.kernel, v.initrd = filepath.Join(v.dir, kernel), filepath.Join(v.dir, initrd)
	for _, f := range []string{kernel, initrd} {
		if _, err := mtools(ctx, "mcopy", "-n", "-i", part, "::/"+f, v.dir); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	return nil
}

// bootFiles picks the kernel (vmlinuz-*) and the initrd (initrd.img-*) out
// of `mdir -b`'s listing of a FAT partition's root; each must be there once.
func bootFiles(mdir string) (kernel, initrd string, err error) {
	for _, f := range strings.Fields(mdir) {
		base := strings.TrimPrefix(f, "::/")
		for _, p := range []struct {
			prefix string
			to     *string
		}{{"vmlinuz-", &kernel}, {"initrd.img-", &initrd}} {
			if !strings.HasPrefix(base, p.prefix) {
				continue
			}
			if *p.to != "" {
				return "", "", fmt.Errorf("two %s* files: %s and %s", p.prefix, *p.to, base)
			}
			*p.to = base
		}
	}
	if kernel == "" || initrd == "" {
		return "", "", fmt.Errorf("want a vmlinuz-* and an initrd.img-* file; it holds: %s", strings.Join(strings.Fields(mdir), " "))
	}
	return kernel, initrd, nil
}

// mtools runs an mtools command on an image file and returns its output.
func mtools(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// plug makes v's tap on the island's LAN bridge.
func (v *vm) plug(ctx context.Context) error {
	for _, args := range [][]string{
		{"ip", "tuntap", "add", "dev", v.tap, "mode", "tap"},
		{"ip", "link", "set", v.tap, "master", island.LANBridge, "up"},
	} {
		if out, err := inLAN(ctx, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %s: %w: %s", v.name, strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// unplug removes v's tap and files.
func (v *vm) unplug() error {
	var errs []error
	if out, err := inLAN(context.Background(), "ip", "link", "del", v.tap).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("%s: remove tap %s: %w: %s", v.name, v.tap, err, out))
	}
	if err := os.RemoveAll(v.dir); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", v.name, err))
	}
	return errors.Join(errs...)
}

// inLAN is a command run in the island's LAN namespace.
func inLAN(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", island.LANNamespace}, args...)...)
}

// qemu is a running VM.
type qemu struct {
	cmd     *exec.Cmd
	started time.Time     // when QEMU was started
	console string        // its serial console's file
	exited  chan struct{} // closed once it exited
	err     error         // its exit, once exited is closed
	log     *os.File      // its output
}

// power boots v's card; boot numbers the boot, for the console's file.
func (v *vm) power(ctx context.Context, boot int) (*qemu, error) {
	q := &qemu{console: filepath.Join(v.dir, fmt.Sprintf("console-%d.log", boot)), exited: make(chan struct{})}
	var err error
	if q.log, err = os.Create(filepath.Join(v.dir, fmt.Sprintf("qemu-%d.log", boot))); err != nil {
		return nil, fmt.Errorf("%s: %w", v.name, err)
	}
	args := append([]string{"qemu-system-aarch64", "-kernel", v.kernel, "-initrd", v.initrd}, qemuArgs...)
	args = append(args, "-drive", "file="+v.img+",if=virtio,format=raw",
		"-netdev", "tap,id=n0,ifname="+v.tap+",script=no,downscript=no", "-device", "virtio-net-pci,netdev=n0",
		"-serial", "file:"+q.console)
	// ip netns exec execs QEMU in its own process: killing it kills QEMU.
	q.cmd = inLAN(ctx, args...)
	q.cmd.Stdout, q.cmd.Stderr = q.log, q.log
	q.started = time.Now()
	if err := q.cmd.Start(); err != nil {
		q.log.Close()
		return nil, fmt.Errorf("%s: start qemu: %w", v.name, err)
	}
	go func() {
		q.err = q.cmd.Wait()
		q.log.Close()
		close(q.exited)
	}()
	return q, nil
}

// off powers the VM off (kills QEMU) and waits for it to end.
func (q *qemu) off() {
	select {
	case <-q.exited:
		return
	default:
	}
	_ = q.cmd.Process.Kill()
	<-q.exited
}

// tail is the end of the VM's console and of QEMU's own output.
func (q *qemu) tail() string {
	var b strings.Builder
	for _, f := range []string{q.console, q.log.Name()} {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "%s ends with:\n%s\n", f, lastLines(string(data), 30))
	}
	return b.String()
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// readyStatus is the status of the Node's Ready condition ("True",
// "False", "Unknown"), "" if the Node or its condition is not there yet.
func readyStatus(ctx context.Context, st *island.State, node string) (string, error) {
	out, err := islandbench.Kubectl(ctx, st, "", "get", "node", node, "--ignore-not-found", "--request-timeout=10s",
		"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	return strings.TrimSpace(string(out)), err
}

// waitNode waits until the Node's Ready status satisfies want, polling
// every pollEvery, and returns when it saw it. A running q that exits, or
// the timeout, fail with the VM's console.
func waitNode(ctx context.Context, st *island.State, node, what string, want func(status string) bool, timeout time.Duration, q *qemu) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var exited <-chan struct{}
	if q != nil {
		exited = q.exited
	}
	for {
		status, err := readyStatus(ctx, st, node)
		if err == nil && want(status) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("%s not %s after %v (Ready: %q; kubectl: %v)", node, what, timeout, status, err)
			if q != nil {
				msg += "\n" + q.tail()
			}
			return time.Time{}, errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: %w", node, ctx.Err())
		case <-exited:
			return time.Time{}, fmt.Errorf("%s: qemu exited (%v) before its Node was %s\n%s", node, q.err, what, q.tail())
		case <-time.After(pollEvery):
		}
	}
}

// isReady and isNotReady are the Ready condition's status of a Node that is
// Ready, and of one that was and is no more.
func isReady(s string) bool    { return s == "True" }
func isNotReady(s string) bool { return s != "True" && s != "" }

// boot is one trial's two boots to Ready.
type boot struct {
	first, again time.Duration
	notReady     time.Duration // from power-off to the Node NotReady
}

// bootTrials runs o.trials boots of fresh cards of raw on the island st,
// and reads isle's memory on the last board with a pod running.
func bootTrials(ctx context.Context, o options, st *island.State, raw string) ([]boot, memory, error) {
	token, err := st.Token()
	if err != nil {
		return nil, memory{}, err
	}
	var boots []boot
	var mem memory
	for i := 1; i <= o.trials; i++ {
		b, m, err := bootTrial(ctx, o, st, raw, token, i, i == o.trials)
		if err != nil {
			return nil, memory{}, fmt.Errorf("boot trial %d: %w", i, err)
		}
		boots = append(boots, b)
		mem = m
		slog.Info("boot trial", "trial", i, "first_boot_to_ready", b.first.Round(100*time.Millisecond),
			"power_off_to_not_ready", b.notReady.Round(100*time.Millisecond), "reboot_to_ready", b.again.Round(100*time.Millisecond))
	}
	return boots, mem, nil
}

// bootTrial flashes and boots trial i's card, powers it off and on again;
// on the last trial it also measures isle's memory with a pod running.
func bootTrial(ctx context.Context, o options, st *island.State, raw, token string, i int, last bool) (b boot, mem memory, err error) {
	v, err := newVM(st, o.dir, i)
	if err != nil {
		return b, mem, err
	}
	config, err := cardConfig(st, v, token)
	if err != nil {
		return b, mem, err
	}
	if err := v.flash(ctx, raw, config); err != nil {
		return b, mem, err
	}
	defer func() { err = errors.Join(err, v.unplug()) }()
	if err := v.plug(ctx); err != nil {
		return b, mem, err
	}

	slog.Info("first boot", "vm", v.name, "address", v.addr)
	if b.first, err = bootToReady(ctx, st, v, 1, nil); err != nil {
		return b, mem, err
	}
	off := time.Now()
	seen, err := waitNode(ctx, st, v.name, "NotReady after power-off", isNotReady, notReadyTimeout, nil)
	if err != nil {
		return b, mem, err
	}
	b.notReady = seen.Sub(off)
	slog.Info("Node NotReady after power-off", "vm", v.name, "after", b.notReady.Round(100*time.Millisecond))

	slog.Info("second boot", "vm", v.name)
	var then func(*qemu) error
	if last {
		then = func(q *qemu) (err error) {
			mem, err = podMemory(ctx, o, st, v, q)
			return err
		}
	}
	b.again, err = bootToReady(ctx, st, v, 2, then)
	return b, mem, err
}

// bootToReady powers v on, times the boot to its Node Ready, and runs then
// (if not nil) with the VM still on; the VM is off when it returns.
func bootToReady(ctx context.Context, st *island.State, v *vm, n int, then func(*qemu) error) (time.Duration, error) {
	q, err := v.power(ctx, n)
	if err != nil {
		return 0, err
	}
	defer q.off()
	seen, err := waitNode(ctx, st, v.name, "Ready", isReady, readyTimeout, q)
	if err != nil {
		return 0, err
	}
	took := seen.Sub(q.started)
	slog.Info("Node Ready", "vm", v.name, "boot", n, "after", took.Round(100*time.Millisecond))
	if then == nil {
		return took, nil
	}
	return took, then(q)
}

// podName is the pod the last board runs while isle's memory is read.
const podName = "imagebench-hello"

// podMemory runs the hello pod on v, lets it settle, and reads the memory
// of v's isle from its /metrics.
func podMemory(ctx context.Context, o options, st *island.State, v *vm, q *qemu) (memory, error) {
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  containers:
  - {name: hello, image: %s}
`, podName, v.name, islandbench.HelloImage)
	if _, err := islandbench.Kubectl(ctx, st, manifest, "apply", "-f", "-"); err != nil {
		return memory{}, err
	}
	start := time.Now()
	if _, err := islandbench.WaitRunning(ctx, st, podTimeout, podName); err != nil {
		return memory{}, fmt.Errorf("%w\n%s", err, q.tail())
	}
	slog.Info("pod running on the VM; letting it settle", "pod", podName, "vm", v.name,
		"took", time.Since(start).Round(100*time.Millisecond), "settle", o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return memory{}, err
	}
	select {
	case <-q.exited:
		return memory{}, fmt.Errorf("%s: qemu exited (%v) while the pod ran\n%s", v.name, q.err, q.tail())
	default:
	}
	// The host is on the island's LAN (the registry's address): it reaches
	// the board directly, never through a proxy.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	url := "http://" + v.metricsAddr() + "/metrics"
	vals, err := benchkit.Scrape(ctx, hc, url)
	if err != nil {
		return memory{}, fmt.Errorf("%s: %w", v.name, err)
	}
	mem, err := memoryOf(vals)
	if err != nil {
		return memory{}, fmt.Errorf("%s: %s: %w", v.name, url, err)
	}
	// /metrics has no split of the RSS: /proc in the VM has, over SSH.
	status, err := v.run("cat /proc/$(systemctl show --value -p MainPID isle-agent)/status")
	if err != nil {
		return memory{}, err
	}
	split, err := benchkit.ProcFields(status, "RssAnon", "RssFile")
	if err != nil {
		return memory{}, fmt.Errorf("%s: isle's /proc/PID/status: %w", v.name, err)
	}
	mem.anon, mem.file = split[0], split[1]
	slog.Info("isle in the VM", "vm", v.name, "rss_MiB", mem.rss>>20, "anon_MiB", mem.anon>>20, "file_MiB", mem.file>>20,
		"heap_inuse_MiB", mem.heap>>20)
	return mem, nil
}

// run runs a shell command on v as root over SSH and returns its output.
func (v *vm) run(cmd string) ([]byte, error) {
	addr := netip.AddrPortFrom(v.addr, 22).String()
	c, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(v.key)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second}) // the board made its host key at first boot: nothing to check it against
	if err != nil {
		return nil, fmt.Errorf("%s: ssh: %w", v.name, err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return nil, fmt.Errorf("%s: ssh: %w", v.name, err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: ssh %q: %w: %s", v.name, cmd, err, out)
	}
	return out, nil
}

// memory is what isle's /metrics and /proc/PID/status say of its memory.
type memory struct {
	rss  uint64 // process_resident_memory_bytes
	heap uint64 // go_memstats_heap_inuse_bytes
	// anon and file split the RSS: RssAnon (the heap, stacks, the Go
	// runtime's) and RssFile (the binary's pages read in).
	anon, file uint64
}

// memoryOf picks isle's memory out of a /metrics scrape.
func memoryOf(vals map[string]float64) (memory, error) {
	var m memory
	var missing []string
	for _, f := range []struct {
		name string
		to   *uint64
	}{{"process_resident_memory_bytes", &m.rss}, {"go_memstats_heap_inuse_bytes", &m.heap}} {
		v, ok := vals[f.name]
		if !ok {
			missing = append(missing, f.name)
			continue
		}
		if v <= 0 || v >= 1<<40 {
			return m, fmt.Errorf("%s %v: want a size in bytes", f.name, v)
		}
		*f.to = uint64(v)
	}
	if len(missing) > 0 {
		return m, fmt.Errorf("no %s", strings.Join(missing, " and no "))
	}
	return m, nil
}
