package agent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/gossip"
)

func testCredential(t *testing.T) wire.Credential {
	t.Helper()
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return wire.Credential{Name: "pi-zero", NodeToken: "id.secret", CACert: ca.CertPEM(), GossipKey: make([]byte, 32)}
}

func TestNodeLabels(t *testing.T) {
	zero := hw.Facts{Arch: "arm", ARMVersion: 6}
	l := nodeLabels("pi-zero", gossip.RoleAgent, zero)
	if l[corev1.LabelArchStable] != "arm" || l[LabelARMVersion] != "6" || l[LabelRole] != "agent" || l[corev1.LabelHostname] != "pi-zero" {
		t.Fatalf("labels %v", l)
	}
	if _, ok := l[LabelControlPlane]; ok {
		t.Fatal("an agent is labelled control-plane")
	}
	l = nodeLabels("pi4", gossip.RoleServer, hw.Facts{Arch: "arm64"})
	if _, ok := l[LabelControlPlane]; !ok || l[LabelARMVersion] != "" {
		t.Fatalf("server labels %v", l)
	}
}

func TestApplyStatus(t *testing.T) {
	f := hw.Facts{Arch: "arm64", CPUs: 4, Memory: 4 << 30, Kernel: "6.6", OSImage: "Debian"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := testReport(t, Config{Credential: wire.Credential{Name: "pi4"}, Address: "10.0.0.5", KubeVersion: "v1.32.4"}, f)
	n := &corev1.Node{}
	if !applyStatus(n, r.status(t0)) {
		t.Fatal("a new status was not a change")
	}
	if !readyByAgent(n) {
		t.Fatal("not Ready after the first status")
	}
	if mem := n.Status.Allocatable[corev1.ResourceMemory]; mem.Value() != f.Memory-f.Memory/10 {
		t.Fatalf("allocatable memory %v", mem.String())
	}
	if applyStatus(n, r.status(t0.Add(time.Hour))) {
		t.Fatal("the same status an hour later is a change: the agent would write every time")
	}
	// The control plane marked it Unknown; the agent's status is a change
	// again and keeps no stale transition time.
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
		}
	}
	if readyByAgent(n) {
		t.Fatal("Unknown counted as the agent's Ready")
	}
	t2 := t0.Add(2 * time.Hour)
	if !applyStatus(n, r.status(t2)) || !readyByAgent(n) {
		t.Fatal("Ready was not posted again")
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && !c.LastTransitionTime.Time.Equal(t2) {
			t.Fatalf("Ready's transition time %v, want %v", c.LastTransitionTime, t2)
		}
		if c.Type == corev1.NodeMemoryPressure && !c.LastTransitionTime.Time.Equal(t0) {
			t.Fatalf("MemoryPressure's transition time moved: %v", c.LastTransitionTime)
		}
	}
}
