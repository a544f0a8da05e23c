package island

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/volumes"
)

// Defaults of an island.
const (
	DefaultDir = "/var/lib/isle-island"
	// RegistryHost is the name images on the island's registry go by in
	// manifests: registry.island/isle/hello:1.0. Boards pull them from the
	// island's registry through a mirror.
	RegistryHost = "registry.island"
	registryPort = 5000
	// cgroupRoot holds the pods' cgroups of every board (one child each).
	cgroupRoot = "/isle-island"
)

// lan is the island's LAN: the host is .1, the VIP .10, board N .10+N.
var lan = netip.MustParsePrefix("10.77.0.0/24")

// Config says what island to make.
type Config struct {
	// Dir holds the island's state, boards' data and logs; default
	// DefaultDir.
	Dir string
	// Servers run the control plane (1 to 7); Agents only run pods (0 to
	// 40). Zero values: 3 servers, and agents as given.
	Servers, Agents int
	// Bin is the isle binary the boards run; default this process's own.
	Bin string
	// Timeout bounds the wait for every Node to be Ready; default 2 min.
	Timeout time.Duration
	// Out receives progress and the summary; default io.Discard.
	Out io.Writer
	// BoardFlags are more flags for every board's isle ("--pod-resync=2s");
	// they are recorded, so restarted boards get them too.
	BoardFlags []string
	// Mirrors are more registry hosts ("registry.k8s.io") whose images the
	// boards pull from the island's registry, as they do registry.island's:
	// push an image there as REPO:TAG and pods pull it as HOST/REPO:TAG.
	Mirrors []string
}

func (c *Config) validate() error {
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	d, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("island: --dir %q: %w", c.Dir, err)
	}
	if d == "/" {
		return errors.New("island: --dir /: want a directory of the island's own")
	}
	c.Dir = d
	if c.Servers == 0 {
		c.Servers = 3
	}
	if c.Servers < 1 || c.Servers > 7 {
		return fmt.Errorf("island: --servers %d: want 1 to 7", c.Servers)
	}
	if c.Agents < 0 || c.Agents > 40 {
		return fmt.Errorf("island: --agents %d: want 0 to 40", c.Agents)
	}
	if c.Bin == "" {
		if c.Bin, err = os.Executable(); err != nil {
			return fmt.Errorf("island: the isle binary: %w", err)
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	for _, h := range c.Mirrors {
		if err := containers.CheckMirror(h, "http://"+net.JoinHostPort(lan.Addr().Next().String(), strconv.Itoa(registryPort))); err != nil || h == RegistryHost {
			return fmt.Errorf("island: --mirror %q: want a registry host other than %s, such as registry.k8s.io", h, RegistryHost)
		}
	}
	for _, f := range c.BoardFlags {
		if !strings.HasPrefix(f, "--") {
			return fmt.Errorf("island: --board-flag %q: want a flag of isle server and agent such as --pod-resync=2s", f)
		}
	}
	return nil
}

// ErrRunning is returned by Up when an island already runs on the machine.
var ErrRunning = errors.New("an island already runs on this machine")

// Up makes an island and waits until every Node is Ready. On failure the
// island is left as it is for inspection; Down removes it.
func Up(ctx context.Context, cfg Config) (*State, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkMachine(); err != nil {
		return nil, err
	}
	if d := runningIsland(); d != "" {
		return nil, fmt.Errorf("island: %w (its directory: %s); `isle down --dir %s` removes it", ErrRunning, d, d)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("island: %w", err)
	}
	release, err := lock(cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := os.Stat(filepath.Join(cfg.Dir, stateFile)); err == nil {
		return nil, fmt.Errorf("island: %s holds the state of an island that is not running (left by a crash?); `isle down --dir %s` removes what is left of it", cfg.Dir, cfg.Dir)
	}
	began := time.Now()
	s := plan(cfg)
	if err := s.save(); err != nil {
		return nil, err
	}
	if err := makeLAN(s); err != nil {
		return s, err
	}
	fmt.Fprintf(cfg.Out, "LAN %v: bridge in namespace isle-lan, this machine is %v on link %s\n", s.LAN, s.Host, HostLink)
	if err := startRegistry(s); err != nil {
		return s, err
	}
	fmt.Fprintf(cfg.Out, "registry on %v:%d (images named %s/...)\n", s.Host, registryPort, RegistryHost)
	for i := range s.Boards {
		b := &s.Boards[i]
		if err := plugBoard(s, b); err != nil {
			return s, err
		}
		if err := startContainerd(s, b); err != nil {
			return s, err
		}
	}
	first := &s.Boards[0]
	if err := startIsle(s, first, cfg.Bin); err != nil {
		return s, err
	}
	if err := waitTokens(ctx, s, first); err != nil {
		return s, err
	}
	token, err := s.Token()
	if err != nil {
		return s, err
	}
	for i := 1; i < len(s.Boards); i++ {
		if err := startIsle(s, &s.Boards[i], cfg.Bin); err != nil {
			return s, err
		}
	}
	fmt.Fprintf(cfg.Out, "started %d boards; waiting for their Nodes to be Ready\n", len(s.Boards))
	if err := writeKubeconfig(ctx, s, cfg.Bin); err != nil {
		return s, err
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := waitReady(wctx, s); err != nil {
		return s, fmt.Errorf("island: %w; the boards' logs are DIR/NAME/isle.log; `isle down --dir %s` removes the island", err, s.Dir)
	}
	members, err := waitVoters(wctx, s, token)
	if err != nil {
		return s, fmt.Errorf("island: %w; the boards' logs are DIR/NAME/isle.log; `isle down --dir %s` removes the island", err, s.Dir)
	}
	summary(cfg.Out, s, members, time.Since(began))
	return s, nil
}

// plan names the island's boards and addresses.
func plan(cfg Config) *State {
	s := &State{Dir: cfg.Dir, LAN: lan, Host: lan.Addr().Next(), VIP: nthAddr(lan, 10), BoardFlags: cfg.BoardFlags, Mirrors: cfg.Mirrors}
	for i := 1; i <= cfg.Servers+cfg.Agents; i++ {
		role := RoleServer
		if i > cfg.Servers {
			role = RoleAgent
		}
		s.Boards = append(s.Boards, Board{Name: "pi" + strconv.Itoa(i), Role: role, Addr: nthAddr(lan, 10+i), Down: true})
	}
	return s
}

func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Addr().As4()
	a[3] += byte(n)
	return netip.AddrFrom4(a)
}

// Board paths.
func (s *State) dataDir(b *Board) string { return filepath.Join(s.boardDir(b.Name), "data") }
func (s *State) runDir(b *Board) string  { return filepath.Join(s.boardDir(b.Name), "run") }
func (s *State) socket(b *Board) string  { return filepath.Join(s.runDir(b), "containerd.sock") }
func (s *State) Kubeconfig() string      { return filepath.Join(s.Dir, "kubeconfig") }
func (s *State) registryDir() string     { return filepath.Join(s.Dir, "registry") }
func (s *State) resolvConf() string      { return filepath.Join(s.Dir, "resolv.conf") }
func (s *State) RegistryAddr() string {
	return net.JoinHostPort(s.Host.String(), strconv.Itoa(registryPort))
}
func (s *State) APIServer() string { return "https://" + net.JoinHostPort(s.VIP.String(), "6443") }
func (s *State) logPath(b *Board, n string) string {
	return filepath.Join(s.boardDir(b.Name), n+".log")
}

func startRegistry(s *State) error {
	dir := s.registryDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return fmt.Errorf("island: registry: %w", err)
	}
	config := containers.RegistryConfig(filepath.Join(dir, "data"), s.RegistryAddr(), "")
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, config, 0o644); err != nil {
		return fmt.Errorf("island: registry: %w", err)
	}
	p, err := start("", filepath.Join(dir, "registry.log"), "docker-registry", "serve", cfgPath)
	if err != nil {
		return err
	}
	s.Registry = p
	if err := s.save(); err != nil {
		return err
	}
	return waitFor(20*time.Second, "the registry on "+s.RegistryAddr(), func() bool {
		c, err := net.DialTimeout("tcp", s.RegistryAddr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, p, filepath.Join(dir, "registry.log"))
}

// startContainerd starts the board's containerd in its namespace.
func startContainerd(s *State, b *Board) error {
	dir := filepath.Join(s.boardDir(b.Name), "containerd")
	state := filepath.Join(s.runDir(b), "containerd")
	for _, d := range []string{dir, state, s.dataDir(b)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("island: board %s: %w", b.Name, err)
		}
	}
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, containers.DaemonConfig(dir, state, s.socket(b)), 0o644); err != nil {
		return fmt.Errorf("island: board %s: %w", b.Name, err)
	}
	p, err := start(boardNS(b.Name), s.logPath(b, "containerd"), "containerd", "--config", cfgPath)
	if err != nil {
		return err
	}
	b.Containerd = p
	if err := s.save(); err != nil {
		return err
	}
	return waitFor(20*time.Second, b.Name+"'s containerd", func() bool {
		c, err := net.Dial("unix", s.socket(b))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, p, s.logPath(b, "containerd"))
}

// startIsle starts the board's isle: the first server with --init, the
// others joining the first board, servers with the server token, agents
// with the agent token. A restarted board finds itself in its data
// directory and ignores both.
func startIsle(s *State, b *Board, bin string) error {
	// The boards' resolver is the host's LAN address: names outside the
	// cluster stay on the island (what answers there is the host's own
	// business; nothing by default, so such names fail).
	if err := os.WriteFile(s.resolvConf(), []byte("nameserver "+s.Host.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("island: %w", err)
	}
	args := []string{b.Role, "--name", b.Name, "--data-dir", s.dataDir(b), "--address", b.Addr.String(),
		"--containerd", s.socket(b), "--run-dir", s.runDir(b), "--cgroup-parent", cgroupRoot + "/" + b.Name,
		"--registry-mirror", RegistryHost + "=http://" + s.RegistryAddr(), "--mdns=false", "--resolv-conf", s.resolvConf(),
		// Simulated boards have virtual LEDs, never the machine's own, and
		// no settings of the machine's own isle (/etc/isle/config.yaml).
		"--led-ready", "virtual", "--led-activity", "virtual", "--config", "",
		// /metrics on the board's own loopback (each board is a namespace).
		"--metrics-addr", "127.0.0.1:10249"}
	if b.Role == RoleServer {
		args = append(args, "--vip", s.VIP.String())
	}
	for _, h := range s.Mirrors {
		args = append(args, "--registry-mirror", h+"=http://"+s.RegistryAddr())
	}
	args = append(args, s.BoardFlags...)
	switch {
	case b != &s.Boards[0]:
		token, err := s.tokenFor(b.Role)
		if err != nil {
			return err
		}
		// In a file only root reads, never on the command line, where
		// every user sees it.
		file := filepath.Join(s.boardDir(b.Name), "token")
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			return fmt.Errorf("island: %w", err)
		}
		args = append(args, "--join", s.Boards[0].Addr.String(), "--token-file", file)
	case b == &s.Boards[0]:
		args = append(args, "--init")
	}
	p, err := start(boardNS(b.Name), s.logPath(b, "isle"), bin, args...)
	if err != nil {
		return err
	}
	b.Isle, b.Down = p, false
	return s.save()
}

// waitTokens waits for the first server's tokens: the server token and
// the first agent token.
func waitTokens(ctx context.Context, s *State, b *Board) error {
	return waitFor(30*time.Second, b.Name+"'s tokens", func() bool {
		_, err := s.Token()
		_, aerr := s.AgentToken()
		return err == nil && aerr == nil && ctx.Err() == nil
	}, b.Isle, s.logPath(b, "isle"))
}

// writeKubeconfig writes an administrator's kubeconfig for the VIP.
func writeKubeconfig(ctx context.Context, s *State, bin string) error {
	out, err := exec.CommandContext(ctx, bin, "kubeconfig", "--data-dir", s.dataDir(&s.Boards[0]),
		"--server", s.APIServer(), "-o", s.Kubeconfig()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("island: kubeconfig: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitFor polls ok until it holds, the process p dies (its log's tail is
// in the error) or the time is up.
func waitFor(d time.Duration, what string, ok func() bool, p Proc, logPath string) error {
	deadline := time.Now().Add(d)
	for !ok() {
		if !p.Alive() {
			return fmt.Errorf("island: waiting for %s: the process exited; %s ends with:\n%s", what, logPath, logTail(logPath))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("island: %s not there after %v; %s ends with:\n%s", what, d, logPath, logTail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

func summary(w io.Writer, s *State, standing map[string]string, took time.Duration) {
	servers, agents := 0, 0
	for _, b := range s.Boards {
		if b.Role == RoleServer {
			servers++
		} else {
			agents++
		}
	}
	fmt.Fprintf(w, "\nisland up in %.1f s: %d servers and %d agents on the LAN %v\n\n", took.Seconds(), servers, agents, s.LAN)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BOARD\tROLE\tADDRESS\tSTORE\tNAMESPACE")
	for _, b := range s.Boards {
		st := standing[b.Name]
		if st == "" {
			st = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\tisle-%s\n", b.Name, b.Role, b.Addr, st, b.Name)
	}
	tw.Flush()
	fmt.Fprintf(w, `
Kubernetes API: %s (the VIP: the Raft leader's board holds it)
Registry: %s (boards pull %s/NAME:TAG from it)

  export KUBECONFIG=%s
  kubectl get nodes -o wide
  ip netns exec isle-pi1 sh            # a shell on board pi1
  isle store status --socket %s/pi1/run/admin.sock
  isle board kill|stop|start|restart|partition|heal NAME --dir %s
  isle down --dir %s
`, s.APIServer(), s.RegistryAddr(), RegistryHost, s.Kubeconfig(), s.Dir, s.Dir, s.Dir)
}

// openIsland takes the lock of the island in dir and reads its state.
func openIsland(dir string) (*State, func(), error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("island: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("island: %w in %s (no such directory)", ErrNoIsland, dir)
	}
	release, err := lock(dir)
	if err != nil {
		return nil, nil, err
	}
	s, err := Load(dir)
	if err != nil {
		release()
		return nil, nil, err
	}
	return s, release, nil
}

// Down removes the island in dir: its processes, mounts, namespaces,
// links, routes, cgroups and files. What is already gone is skipped, so
// it also cleans up after a crash of `isle up` or of the machine.
func Down(dir string, out io.Writer) error {
	s, release, err := openIsland(dir)
	if err != nil {
		return err
	}
	defer release()
	dir = s.Dir
	var errs []error
	for i := range s.Boards {
		b := &s.Boards[i]
		if err := powerOff(s, b); err != nil {
			errs = append(errs, err)
		}
		if err := unplugBoard(b.Name); err != nil {
			errs = append(errs, err)
		}
		fmt.Fprintf(out, "board %s removed\n", b.Name)
	}
	if s.Registry.Alive() {
		s.Registry.signal(syscall.SIGKILL)
	}
	if err := containers.RemoveCgroup(cgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if err := removeLAN(); err != nil {
		errs = append(errs, err)
	}
	if err := volumes.UnmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		// Keep the state: a second isle down retries what failed.
		return fmt.Errorf("island: down: %w", errors.Join(errs...))
	}
	for _, name := range []string{"registry", "kubeconfig", "resolv.conf", stateFile} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, b := range s.Boards {
		if err := os.RemoveAll(s.boardDir(b.Name)); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.Remove(filepath.Join(dir, "island.lock"))
	_ = os.Remove(dir) // if nothing else is in it
	if len(errs) > 0 {
		return fmt.Errorf("island: down: %w", errors.Join(errs...))
	}
	fmt.Fprintf(out, "island in %s removed\n", dir)
	return nil
}

// powerOff kills every process of the board (isle, containerd, shims,
// containers) and clears what a power cut clears: its /run, and with it
// containerd's and runc's state and the pods' namespaces.
func powerOff(s *State, b *Board) error {
	paths := []string{boardNS(b.Name)}
	pods, _ := filepath.Glob(filepath.Join(s.runDir(b), "netns", "*"))
	paths = append(paths, pods...)
	var errs []error
	if err := killBoard(paths, cgroupRoot+"/"+b.Name); err != nil {
		errs = append(errs, err)
	}
	b.Isle.signal(syscall.SIGKILL)
	b.Containerd.signal(syscall.SIGKILL)
	// The shims' sockets live outside the board's directories.
	addrs, _ := filepath.Glob(filepath.Join(s.runDir(b), "containerd", "io.containerd.runtime.v2.task", "*", "*", "address"))
	for _, a := range addrs {
		if sock, err := os.ReadFile(a); err == nil {
			if p, ok := strings.CutPrefix(strings.TrimSpace(string(sock)), "unix://"); ok && strings.HasPrefix(p, "/run/containerd/s/") {
				_ = os.Remove(p)
			}
		}
	}
	if err := volumes.UnmountUnder(s.boardDir(b.Name)); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(s.runDir(b)); err != nil {
		errs = append(errs, fmt.Errorf("island: board %s: %w", b.Name, err))
	}
	if err := containers.RemoveCgroup(cgroupRoot + "/" + b.Name); err != nil {
		errs = append(errs, err)
	}
	b.Down = true
	return errors.Join(errs...)
}
