package containers_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/containers/ctrtest"
)

// rawLog is a LogFile that keeps the output as it comes.
type rawLog struct {
	mu sync.Mutex
	f  *os.File
}

func (l *rawLog) Stream(string) io.Writer { return l }
func (l *rawLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}
func (l *rawLog) Close() error { return l.f.Close() }

func openRaw(path string) (containers.LogFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &rawLog{f: f}, nil
}

type env struct {
	rt      *containers.Runtime
	cfg     containers.Config
	busybox string
	dir     string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	sock := ctrtest.Containerd(t)
	reg := ctrtest.Registry(t, "")
	ref := ctrtest.Push(t, reg, "isle/busybox:1", ctrtest.Busybox(t), nil)
	dir := t.TempDir()
	cfg := containers.Config{Address: sock, Namespace: "isle-test", FIFODir: filepath.Join(dir, "fifo"), OpenLog: openRaw}
	rt, err := containers.Connect(ctrtest.Context(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rt.Close()
		_ = containers.RemoveCgroup("/isle-test")
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go rt.Run(ctx)
	return &env{rt: rt, cfg: cfg, busybox: ref, dir: dir}
}

func (e *env) image(t *testing.T) string {
	t.Helper()
	img, err := e.rt.EnsureImage(ctrtest.Context(t), e.busybox, corev1.PullIfNotPresent, nil)
	if err != nil {
		t.Fatal(err)
	}
	return img.Ref
}

func (e *env) run(t *testing.T, s containers.Spec) {
	t.Helper()
	ctx := ctrtest.Context(t)
	if s.ID == "" {
		s.ID = containers.NewID()
	}
	if err := e.rt.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Start(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
}

func waitExit(t *testing.T, rt *containers.Runtime, id string) containers.Container {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := rt.Inspect(ctrtest.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State == containers.Exited {
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("container %s did not exit", id)
	return containers.Container{}
}

// waitLog reads a container's log until it satisfies ok, for at most 10 s
// (a container starts slowly under emulation), and returns it.
func waitLog(t *testing.T, path string, ok func([]byte) bool) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if ok(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after 10 s: %q", path, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunToExit(t *testing.T) {
	e := newEnv(t)
	ref := e.image(t)
	log := filepath.Join(e.dir, "c.log")
	id := containers.NewID()
	e.run(t, containers.Spec{ID: id, Image: ref, Command: []string{"sh", "-c", "echo out; echo err >&2; echo $GREETING; exit 3"},
		Env: []string{"GREETING=hello"}, LogPath: log, Labels: map[string]string{"app": "t"}, CgroupParent: "/isle-test/pod1"})
	c := waitExit(t, e.rt, id)
	if c.ExitCode != 3 || c.OOMKilled || c.StartedAt.IsZero() || c.FinishedAt.Before(c.StartedAt) || c.Labels["app"] != "t" {
		t.Fatalf("exit recorded as %+v", c)
	}
	got, _ := os.ReadFile(log)
	for _, want := range []string{"out\n", "err\n", "hello\n"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if err := e.rt.Remove(ctrtest.Context(t), id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Inspect(ctrtest.Context(t), id); !errors.Is(err, containers.ErrNotFound) {
		t.Fatalf("inspect after remove: %v", err)
	}
	if err := containers.RemoveCgroup("/isle-test/pod1"); err != nil {
		t.Fatal(err)
	}
}

func TestStopGraceAndKill(t *testing.T) {
	e := newEnv(t)
	ref := e.image(t)
	// One container leaves on SIGTERM, one ignores it.
	// Each says ready once its trap is set.
	polite, stubborn := containers.NewID(), containers.NewID()
	politeLog, stubbornLog := filepath.Join(e.dir, "polite.log"), filepath.Join(e.dir, "stubborn.log")
	e.run(t, containers.Spec{ID: polite, Image: ref, LogPath: politeLog,
		Command: []string{"sh", "-c", "trap 'exit 7' TERM; echo ready; while true; do sleep 0.1; done"}})
	e.run(t, containers.Spec{ID: stubborn, Image: ref, LogPath: stubbornLog,
		Command: []string{"sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.1; done"}})
	for _, log := range []string{politeLog, stubbornLog} {
		waitLog(t, log, func(b []byte) bool { return bytes.Contains(b, []byte("ready\n")) })
	}
	start := time.Now()
	if err := e.rt.Stop(ctrtest.Context(t), polite, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.rt.Inspect(ctrtest.Context(t), polite); c.State != containers.Exited || c.ExitCode != 7 {
		t.Fatalf("polite container: %+v", c)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("SIGTERM honoured only after %s", took)
	}
	start = time.Now()
	if err := e.rt.Stop(ctrtest.Context(t), stubborn, time.Second); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.rt.Inspect(ctrtest.Context(t), stubborn); c.State != containers.Exited || c.ExitCode != 137 {
		t.Fatalf("stubborn container: %+v", c)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("killed after %s, before its grace period", took)
	}
}

func TestOOMKilled(t *testing.T) {
	e := newEnv(t)
	ref := e.image(t)
	id := containers.NewID()
	e.run(t, containers.Spec{ID: id, Image: ref, MemoryLimit: 16 << 20, CgroupParent: "/isle-test/oom",
		Command: []string{"sh", "-c", "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo survived"}})
	c := waitExit(t, e.rt, id)
	if !c.OOMKilled || c.ExitCode != 137 {
		t.Fatalf("container over its memory limit: %+v", c)
	}
	_ = e.rt.Remove(ctrtest.Context(t), id)
	_ = containers.RemoveCgroup("/isle-test/oom")
}

func TestExecAndStats(t *testing.T) {
	e := newEnv(t)
	ref := e.image(t)
	id := containers.NewID()
	e.run(t, containers.Spec{ID: id, Image: ref, Command: []string{"sleep", "3600"}, WorkingDir: "/tmp",
		Env: []string{"X=1"}, CgroupParent: "/isle-test/exec"})
	ctx := ctrtest.Context(t)
	var out, errOut bytes.Buffer
	code, err := e.rt.Exec(ctx, id, []string{"sh", "-c", "cat; pwd; echo $X; echo oops >&2; exit 4"},
		containers.Streams{Stdin: strings.NewReader("from stdin\n"), Stdout: &out, Stderr: &errOut})
	if err != nil || code != 4 {
		t.Fatalf("exec: code %d, err %v", code, err)
	}
	if out.String() != "from stdin\n/tmp\n1\n" || errOut.String() != "oops\n" {
		t.Fatalf("exec output %q / %q", out.String(), errOut.String())
	}
	code, outb, err := e.rt.ExecSync(ctx, id, []string{"sleep", "10"}, 300*time.Millisecond)
	if !errors.Is(err, containers.ErrTimeout) {
		t.Fatalf("exec past its timeout: code %d, out %q, err %v", code, outb, err)
	}
	c, err := e.rt.Inspect(ctx, id)
	if err != nil || c.State != containers.Running || c.Cgroup == "" {
		t.Fatalf("inspect running: %+v, %v", c, err)
	}
	u, err := containers.CgroupUsage(c.Cgroup)
	if err != nil || u.WorkingSet == 0 || u.CPUNanos == 0 {
		t.Fatalf("usage %+v, %v", u, err)
	}
	if err := e.rt.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	_ = containers.RemoveCgroup("/isle-test/exec")
}

func TestReattachAfterRestart(t *testing.T) {
	e := newEnv(t)
	ref := e.image(t)
	log := filepath.Join(e.dir, "ticker.log")
	id := containers.NewID()
	e.run(t, containers.Spec{ID: id, Image: ref, LogPath: log,
		Command: []string{"sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.05; done"}})
	waitLog(t, log, func(b []byte) bool { return bytes.Count(b, []byte("\n")) >= 3 })
	// The agent goes away (its copiers stop) and comes back.
	e.rt.Close()
	time.Sleep(300 * time.Millisecond)
	rt2, err := containers.Connect(ctrtest.Context(t), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	cs, err := rt2.Containers(ctrtest.Context(t))
	if err != nil || len(cs) != 1 || cs[0].ID != id || cs[0].State != containers.Running {
		t.Fatalf("containers after restart: %+v, %v", cs, err)
	}
	if err := rt2.Reattach(ctrtest.Context(t), id); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(log)
	after := waitLog(t, log, func(b []byte) bool { return len(b) > len(before) })
	// The container ran on: its ticks are consecutive from 0.
	lines := strings.Split(strings.TrimSpace(string(after)), "\n")
	for i, l := range lines {
		if l != "tick "+itoa(i) {
			t.Fatalf("line %d is %q: the container restarted or output was lost", i, l)
		}
	}
	if err := rt2.Remove(ctrtest.Context(t), id); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestImagePolicyAndErrors(t *testing.T) {
	e := newEnv(t)
	ctx := ctrtest.Context(t)
	if _, err := e.rt.EnsureImage(ctx, e.busybox, corev1.PullNever, nil); !errors.Is(err, containers.ErrImageNeverPull) {
		t.Fatalf("Never with the image absent: %v", err)
	}
	missing := strings.Replace(e.busybox, "busybox:1", "nothere:1", 1)
	_, err := e.rt.EnsureImage(ctx, missing, corev1.PullIfNotPresent, nil)
	if !errors.Is(err, containers.ErrImagePull) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing image: %v", err)
	}
	if _, err := e.rt.EnsureImage(ctx, "no spaces allowed:1", corev1.PullIfNotPresent, nil); !errors.Is(err, containers.ErrInvalidImage) {
		t.Fatalf("invalid name: %v", err)
	}
	e.image(t)
	if img, err := e.rt.EnsureImage(ctx, e.busybox, corev1.PullNever, nil); err != nil || !strings.Contains(img.ID, "@sha256:") {
		t.Fatalf("Never with the image present: %+v, %v", img, err)
	}
}

func TestStartErrorBadCommand(t *testing.T) {
	e := newEnv(t)
	ref := e.image(t)
	id := containers.NewID()
	err := e.rt.Create(ctrtest.Context(t), containers.Spec{ID: id, Image: ref, Command: []string{"/no/such/binary"}})
	if !errors.Is(err, containers.ErrStartFailed) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("create with a missing binary: %v", err)
	}
	c, err := e.rt.Inspect(ctrtest.Context(t), id)
	if err != nil || c.State != containers.Exited || c.ExitCode != 128 || c.Reason != "StartError" || !strings.Contains(c.Message, "/no/such/binary") {
		t.Fatalf("the failed start is recorded as %+v (%v)", c, err)
	}
}

func TestImportArchive(t *testing.T) {
	e := newEnv(t)
	ctx := ctrtest.Context(t)
	const ref = "example.org/isle/offline:1"
	archive := ctrtest.Archive(t, ref, ctrtest.Busybox(t))
	names, err := e.rt.Import(ctx, bytes.NewReader(archive))
	if err != nil || len(names) != 1 || names[0] != ref {
		t.Fatalf("import: %v, %v", names, err)
	}
	// Present now: a pod with pull policy Never runs it, no registry asked.
	img, err := e.rt.EnsureImage(ctx, ref, corev1.PullNever, nil)
	if err != nil || img.Pulled {
		t.Fatalf("the imported image: %+v, %v", img, err)
	}
	id := containers.NewID()
	e.run(t, containers.Spec{ID: id, Image: img.Ref, Command: []string{"true"}})
	if c := waitExit(t, e.rt, id); c.ExitCode != 0 {
		t.Fatalf("a container of the imported image: %+v", c)
	}
	if _, err := e.rt.Import(ctx, strings.NewReader("not a tar")); err == nil {
		t.Fatal("a file that is no archive was imported")
	}
}

func TestCollectImages(t *testing.T) {
	e := newEnv(t)
	ctx := ctrtest.Context(t)
	reg := strings.Split(e.busybox, "/")[0]
	other := ctrtest.Push(t, reg, "isle/other:1", ctrtest.Busybox(t), nil)
	spare := ctrtest.Push(t, reg, "isle/spare:1", ctrtest.Busybox(t), nil)
	used := e.image(t)
	for _, ref := range []string{other, spare} {
		if _, err := e.rt.EnsureImage(ctx, ref, corev1.PullIfNotPresent, nil); err != nil {
			t.Fatal(err)
		}
	}
	id := containers.NewID()
	e.run(t, containers.Spec{ID: id, Image: used, Command: []string{"sleep", "3600"}})
	if root, err := e.rt.ImageFS(ctx); err != nil || !strings.HasSuffix(root, "io.containerd.snapshotter.v1.overlayfs") {
		t.Fatalf("image filesystem: %q, %v", root, err)
	}
	// Below the high mark: nothing goes.
	removed, err := e.rt.CollectImages(ctx, nil, func() (float64, error) { return 0.5, nil }, 0.85, 0.8)
	if err != nil || len(removed) != 0 {
		t.Fatalf("below the high mark: removed %v, %v", removed, err)
	}
	// Above it: unused images go, oldest first, until below the low mark
	// (here after one); neither the running container's nor an image in
	// use by a pod goes.
	usage := []float64{0.9, 0.79}
	removed, err = e.rt.CollectImages(ctx, map[string]bool{spare: true}, func() (float64, error) {
		u := usage[0]
		if len(usage) > 1 {
			usage = usage[1:]
		}
		return u, nil
	}, 0.85, 0.8)
	if err != nil || len(removed) != 1 || removed[0] != other {
		t.Fatalf("above the high mark: removed %v (want only %s), %v", removed, other, err)
	}
	for _, ref := range []string{used, spare} {
		if _, err := e.rt.EnsureImage(ctx, ref, corev1.PullNever, nil); err != nil {
			t.Fatalf("%s was collected: %v", ref, err)
		}
	}
}

// TestSecurityAndResources: securityContext basics and CPU limits reach
// the container.
func TestSecurityAndResources(t *testing.T) {
	e := newEnv(t)
	ref := e.image(t)
	uid, gid := int64(1000), int64(2000)
	log := filepath.Join(e.dir, "sec.log")
	id := containers.NewID()
	e.run(t, containers.Spec{ID: id, Image: ref, LogPath: log, RunAsUser: &uid, RunAsGroup: &gid, ReadOnlyRootFS: true,
		DropCaps: []string{"ALL"}, AddCaps: []string{"NET_BIND_SERVICE"}, CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000,
		CgroupParent: "/isle-test/sec",
		Command: []string{"sh", "-c", "id -u; id -g; touch /rootfs-write 2>/dev/null && echo writable || echo readonly; " +
			"grep CapBnd /proc/self/status; sleep 3600"}})
	var out []byte
	waitFor := time.Now().Add(10 * time.Second)
	for time.Now().Before(waitFor) {
		if out, _ = os.ReadFile(log); bytes.Count(out, []byte("\n")) >= 4 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// NET_BIND_SERVICE alone, bit 10 of the bounding set (a non-root
	// process has no effective capabilities, as in Kubernetes).
	want := "1000\n2000\nreadonly\nCapBnd:\t0000000000000400\n"
	if string(out) != want {
		t.Fatalf("the container's view:\n%s\nwant:\n%s", out, want)
	}
	c, err := e.rt.Inspect(ctrtest.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	quota, shares := "cpu/"+c.Cgroup+"/cpu.cfs_quota_us", "cpu/"+c.Cgroup+"/cpu.shares"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		t.Skip("cgroup v2 host: the v1 files are checked on v1 hosts (as CI's)")
	}
	for file, want := range map[string]string{quota: "50000", shares: "512"} {
		got, err := os.ReadFile("/sys/fs/cgroup/" + file)
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("%s = %q (%v), want %s", file, got, err, want)
		}
	}
	_ = e.rt.Remove(ctrtest.Context(t), id)
	_ = containers.RemoveCgroup("/isle-test/sec")
}

// A containerd that dies is seen at the next health check, without waiting
// out its timeout for the connection to come back; one that starts again
// is seen serving.
func TestServing(t *testing.T) {
	ctrtest.Require(t)
	dir, err := os.MkdirTemp("", "ctrd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d, err := ctrtest.StartContainerd(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if d != nil {
			d.Stop()
		}
	}()
	rt, err := containers.Connect(ctrtest.Context(t), containers.Config{Address: d.Socket, Namespace: "isle-test", FIFODir: filepath.Join(dir, "fifo")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if !rt.Serving(t.Context(), 5*time.Second) {
		t.Fatal("a running containerd is not serving")
	}
	d.Stop()
	const timeout = 5 * time.Second
	start := time.Now()
	if rt.Serving(t.Context(), timeout) {
		t.Fatal("a killed containerd is serving")
	}
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("the health check of a killed containerd took %v, want it to fail fast, not wait out its %v", took, timeout)
	}
	if d, err = ctrtest.StartContainerd(dir); err != nil {
		t.Fatal(err)
	}
	// The client connects again after its back-off (at most 3 s).
	start = time.Now()
	for !rt.Serving(t.Context(), timeout) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("a containerd started again is not serving after 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("serving again %v after containerd started again", time.Since(start).Round(time.Millisecond))
}
