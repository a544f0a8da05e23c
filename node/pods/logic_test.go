package pods

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/logs"
)

func TestBackoff(t *testing.T) {
	var b backoff
	now := time.Unix(1000, 0)
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for i, w := range want {
		b.next(now, time.Second)
		if b.delay != w || !b.until.Equal(now.Add(w)) {
			t.Fatalf("restart %d: delay %v until %v, want %v", i+1, b.delay, b.until, w)
		}
	}
	// A container that ran ten minutes starts over.
	b.next(now, 10*time.Minute)
	if b.delay != backoffInitial {
		t.Fatalf("after a long run: delay %v, want %v", b.delay, backoffInitial)
	}
}

func TestRestartable(t *testing.T) {
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		code   int
		want   bool
	}{
		{corev1.RestartPolicyAlways, 0, true}, {corev1.RestartPolicyAlways, 1, true}, {"", 0, true},
		{corev1.RestartPolicyOnFailure, 0, false}, {corev1.RestartPolicyOnFailure, 2, true},
		{corev1.RestartPolicyNever, 0, false}, {corev1.RestartPolicyNever, 137, false},
	} {
		if got := restartable(tc.policy, tc.code); got != tc.want {
			t.Errorf("restartable(%q, %d) = %v", tc.policy, tc.code, got)
		}
	}
}

func TestPhase(t *testing.T) {
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	done := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	waiting := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	backingOff := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	pod := func(p corev1.RestartPolicy) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: p}} }
	for _, tc := range []struct {
		name       string
		policy     corev1.RestartPolicy
		cs         []corev1.ContainerStatus
		init, fail bool
		want       corev1.PodPhase
	}{
		{"init running", corev1.RestartPolicyAlways, []corev1.ContainerStatus{waiting}, false, false, corev1.PodPending},
		{"init failed, Never", corev1.RestartPolicyNever, nil, false, true, corev1.PodFailed},
		{"creating", corev1.RestartPolicyAlways, []corev1.ContainerStatus{waiting}, true, false, corev1.PodPending},
		{"one running", corev1.RestartPolicyAlways, []corev1.ContainerStatus{running, done(0)}, true, false, corev1.PodRunning},
		{"crash looping", corev1.RestartPolicyAlways, []corev1.ContainerStatus{backingOff}, true, false, corev1.PodRunning},
		{"all done, Never", corev1.RestartPolicyNever, []corev1.ContainerStatus{done(0), done(0)}, true, false, corev1.PodSucceeded},
		{"one failed, Never", corev1.RestartPolicyNever, []corev1.ContainerStatus{done(0), done(3)}, true, false, corev1.PodFailed},
		{"all succeeded, OnFailure", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{done(0)}, true, false, corev1.PodSucceeded},
		{"failed, OnFailure restarts", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{done(1)}, true, false, corev1.PodRunning},
	} {
		got := phase(pod(tc.policy), corev1.PodStatus{ContainerStatuses: tc.cs}, tc.init, tc.fail)
		if got != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestApplyResources(t *testing.T) {
	q := resource.MustParse
	c := &corev1.Container{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("64Mi")},
	}}
	var s containers.Spec
	applyResources(&s, c)
	if s.CPUShares != 256 || s.CPUQuota != 50000 || s.CPUPeriod != 100000 || s.MemoryLimit != 64<<20 {
		t.Fatalf("250m request, 500m and 64Mi limits: %+v", s)
	}
	var none containers.Spec
	applyResources(&none, &corev1.Container{})
	if none.CPUShares != 2 || none.CPUQuota != 0 || none.MemoryLimit != 0 {
		t.Fatalf("no resources: %+v", none)
	}
}

func TestApplySecurity(t *testing.T) {
	yes, root, user := true, int64(0), int64(1000)
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes}}}
	var s containers.Spec
	err := applySecurity(&s, pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: &root}})
	if err == nil || !strings.Contains(err.Error(), "runAsNonRoot") {
		t.Fatalf("root under runAsNonRoot: %v", err)
	}
	s = containers.Spec{}
	err = applySecurity(&s, pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: &user,
		ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}}})
	if err != nil || *s.RunAsUser != 1000 || !s.ReadOnlyRootFS || s.AddCaps[0] != "NET_ADMIN" || s.DropCaps[0] != "ALL" {
		t.Fatalf("a non-root container: %+v, %v", s, err)
	}
}

func TestSpecHash(t *testing.T) {
	a := &corev1.Container{Name: "c", Image: "busybox:1", Command: []string{"sleep", "1"}}
	b := a.DeepCopy()
	b.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if specHash(a) != specHash(b) {
		t.Fatal("a change of resources restarts the container")
	}
	b.Image = "busybox:2"
	if specHash(a) == specHash(b) {
		t.Fatal("a new image does not restart the container")
	}
}

func TestHostsFile(t *testing.T) {
	const header = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	pod := func(mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.Namespace = "web-0", "shop"
		mod(p)
		return p
	}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		ips       []string
		nodeHosts string
		want      string
	}{
		{"pod network", pod(func(*corev1.Pod) {}), []string{"10.42.1.7"}, "", header + "10.42.1.7\tweb-0\n"},
		{"hostname and subdomain", pod(func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "db", "db-svc" }), []string{"10.42.1.7"}, "",
			header + "10.42.1.7\tdb.db-svc.shop.svc.cluster.local\tdb\n"},
		{"host aliases", pod(func(p *corev1.Pod) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.9", Hostnames: []string{"a.lan", "b.lan"}}, {IP: "10.0.0.8", Hostnames: []string{"c.lan"}}}
		}), []string{"10.42.1.7"}, "", header + "10.42.1.7\tweb-0\n\n# Entries added by HostAliases.\n10.0.0.9\ta.lan\tb.lan\n10.0.0.8\tc.lan\n"},
		{"no IP yet", pod(func(*corev1.Pod) {}), nil, "", header},
		{"host network", pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), []string{"10.77.0.14"}, "127.0.0.1 localhost\n10.77.0.14 pi4",
			"# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n10.77.0.14 pi4\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostsFile(tc.pod, tc.ips, "cluster.local", []byte(tc.nodeHosts)); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	// The e2e suite's test tells a managed file by its first line.
	if got := hostsFile(pod(func(*corev1.Pod) {}), nil, "cluster.local", nil); !strings.HasPrefix(got, "# Kubernetes-managed hosts file.") {
		t.Errorf("no header: %q", got)
	}
}

func TestWaitingReason(t *testing.T) {
	m := &Manager{}
	c := corev1.Container{Name: "app"}
	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	withInit := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{c}}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		set  string // a reason the pod's sync gave
		want string
	}{
		{"no init containers", plain, "", "ContainerCreating"},
		{"init containers to run first", withInit, "", "PodInitializing"},
		{"a reason given", withInit, "ErrImagePull", "ErrImagePull"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := newPodState("u", "ns", "p")
			if tc.set != "" {
				ps.waiting["app"] = corev1.ContainerStateWaiting{Reason: tc.set}
			}
			cs := m.containerStatus(tc.pod, ps, &c, false)
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != tc.want {
				t.Errorf("state %+v, want waiting %s", cs.State, tc.want)
			}
		})
	}
}

func TestListMessage(t *testing.T) {
	if got := listMessage("containers with incomplete status", []string{"init1", "init2"}); got != "containers with incomplete status: [init1 init2]" {
		t.Errorf("got %q", got)
	}
	if got := listMessage("containers with unready status", nil); got != "" {
		t.Errorf("no containers: %q", got)
	}
}

// The termination message: the file the container wrote, else, with
// FallbackToLogsOnError and a failure, the end of its log (80 lines, then
// 2 KiB at most), as the kubelet gives it.
func TestTerminationMessage(t *testing.T) {
	m := &Manager{cfg: Config{DataDir: t.TempDir()}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	spec := &corev1.Container{Name: "c", TerminationMessagePath: "/dev/termination-log"}
	c := containers.Container{Labels: map[string]string{labelAttempt: "2"}, ExitCode: 1}

	logPath := m.logPath("ns", "p", pod.UID, "c", 2)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := logs.NewWriter(logPath, 1<<20, 2, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(w.Stream("stdout"), "line %03d %s\n", i, strings.Repeat("x", 30)) // 40 bytes
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.terminationMessage(pod, c, spec); got != "" {
		t.Errorf("policy File: %q, want none", got)
	}
	spec.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	got := m.terminationMessage(pod, c, spec)
	if want := strings.Repeat("x", 30) + "\nline 100 "; len(got) != 2048 || !strings.Contains(got, want) || strings.Contains(got, "line 048") {
		t.Errorf("fallback to the log: %q, want the last 2 KiB of its last 80 lines", got)
	}
	c.ExitCode = 0
	if got := m.terminationMessage(pod, c, spec); got != "" {
		t.Errorf("success: %q, want none", got)
	}
	c.ExitCode = 1
	f := filepath.Join(m.podDir(pod.UID), "termination", "c-2")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("written by the container"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := m.terminationMessage(pod, c, spec); got != "written by the container" {
		t.Errorf("with the file: %q", got)
	}
}

func TestActiveDeadline(t *testing.T) {
	start := metav1.NewTime(time.Unix(1000, 0))
	now := time.Unix(1003, 0)
	for _, tc := range []struct {
		name     string
		ads      *int64
		psStart  *metav1.Time
		podStart *metav1.Time
		left     time.Duration
		ok       bool
	}{
		{"no deadline", nil, &start, &start, 0, false},
		{"not started", new(int64(5)), nil, nil, 0, false},
		{"running", new(int64(5)), &start, nil, 2 * time.Second, true},
		{"from the API's start time", new(int64(5)), nil, &start, 2 * time.Second, true},
		{"past", new(int64(1)), &start, nil, -2 * time.Second, true},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: tc.ads}, Status: corev1.PodStatus{StartTime: tc.podStart}}
		ps := newPodState("u", "ns", "p")
		ps.startTime = tc.psStart
		if left, ok := activeDeadline(pod, ps, now); left != tc.left || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, left, ok, tc.left, tc.ok)
		}
	}
}

func TestSysctls(t *testing.T) {
	for in, want := range map[string]string{
		"kernel.shm_rmid_forced":            "kernel.shm_rmid_forced",
		"kernel/shm_rmid_forced":            "kernel.shm_rmid_forced",
		"net/ipv4/conf/eth0.100/forwarding": "net.ipv4.conf.eth0/100.forwarding",
		"net.ipv4.conf.eth0/100.forwarding": "net.ipv4.conf.eth0/100.forwarding",
		"plain":                             "plain",
	} {
		if got := dottedSysctl(in); got != want {
			t.Errorf("dottedSysctl(%q) = %q, want %q", in, got, want)
		}
	}
	pod := func(host bool, names ...string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: host, SecurityContext: &corev1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{&corev1.Pod{}, ""},
		{pod(false, "kernel/shm_rmid_forced", "net.ipv4.tcp_syncookies"), ""},
		{pod(false, "kernel.msgmax"), `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{pod(true, "net.ipv4.tcp_syncookies"), `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled`},
		{pod(true, "kernel.shm_rmid_forced"), ""},
	} {
		if got := forbiddenSysctl(tc.pod); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.pod.Spec.SecurityContext, got, tc.want)
		}
	}
	if got := podSysctls(pod(false, "kernel/shm_rmid_forced")); got["kernel.shm_rmid_forced"] != "1" || len(got) != 1 {
		t.Errorf("podSysctls: %v", got)
	}
}

// A pod that came with its node (a DaemonSet's) has no PodScheduled
// condition from the scheduler: the board's status says it is scheduled,
// as the kubelet's does (the conformance spec "NodeSelector is respected
// if not matching" failed on a DaemonSet's pod without it); one the
// scheduler bound keeps the scheduler's.
func TestStatusReportsPodScheduled(t *testing.T) {
	m := &Manager{cfg: Config{NodeIP: "10.77.0.14"}}
	bound := metav1.NewTime(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name  string
		conds []corev1.PodCondition
		want  metav1.Time // the PodScheduled condition's time; zero: now
	}{
		{"created on its node", nil, metav1.Time{}},
		{"bound by the scheduler", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: bound}}, bound},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "pi4"}, Status: corev1.PodStatus{Conditions: tc.conds}}
		st := m.podStatus(pod, &podState{})
		var got []corev1.PodCondition
		for _, c := range st.Conditions {
			if c.Type == corev1.PodScheduled {
				got = append(got, c)
			}
		}
		if len(got) != 1 || got[0].Status != corev1.ConditionTrue {
			t.Errorf("%s: PodScheduled conditions %+v, want one, True", tc.name, got)
			continue
		}
		if tc.want.IsZero() && time.Since(got[0].LastTransitionTime.Time) > time.Minute || !tc.want.IsZero() && !got[0].LastTransitionTime.Equal(&tc.want) {
			t.Errorf("%s: PodScheduled since %v, want %v (zero: now)", tc.name, got[0].LastTransitionTime, tc.want)
		}
	}
}
