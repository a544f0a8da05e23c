package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/gossip"
)

func testCredential(t *testing.T) Credential {
	t.Helper()
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return Credential{Name: "pi-zero", NodeToken: "id.secret", CACert: ca.CertPEM, GossipKey: make([]byte, 32)}
}

func TestCredentialFile(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := LoadCredential(dir); ok || err != nil {
		t.Fatalf("empty directory: ok %v, err %v", ok, err)
	}
	c := testCredential(t)
	if err := c.Save(dir); err != nil {
		t.Fatal(err)
	}
	got, ok, err := LoadCredential(dir)
	if err != nil || !ok || got.Name != c.Name || got.NodeToken != c.NodeToken {
		t.Fatalf("load: %+v %v %v", got, ok, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, CredentialFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential mode %v", fi.Mode())
	}
	for _, bad := range []struct{ name, content, want string }{
		{"torn", `{"name": "pi`, "remove it to join"},
		{"no token", `{"name":"pi","caCert":"","gossipKey":""}`, "no node token"},
	} {
		if err := os.WriteFile(filepath.Join(dir, CredentialFile), []byte(bad.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadCredential(dir); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), CredentialFile) {
			t.Errorf("%s: %v, want an error naming the file and %q", bad.name, err, bad.want)
		}
	}
	c.GossipKey = c.GossipKey[:5]
	if err := c.Save(dir); err == nil {
		t.Fatal("a credential with a short gossip key was saved")
	}
}

func TestWithServers(t *testing.T) {
	c := Credential{Servers: []string{"10.0.0.1:7946"}}
	c2, changed := c.withServers([]string{"10.0.0.2:7946", "10.0.0.1:7946"})
	if !changed || strings.Join(c2.Servers, ",") != "10.0.0.1:7946,10.0.0.2:7946" {
		t.Fatalf("union: %v %v", c2.Servers, changed)
	}
	if _, changed := c2.withServers([]string{"10.0.0.2:7946"}); changed {
		t.Fatal("a server already known changed the list (an SD-card write)")
	}
	if _, changed := c2.withServers(nil); changed {
		t.Fatal("no servers seen changed the list")
	}
	var many []string
	for i := range maxServers + 1 {
		many = append(many, "10.0.1."+string(rune('a'+i))+":7946")
	}
	if c3, _ := c2.withServers(many); len(c3.Servers) != len(many) || c3.Servers[0] == "10.0.0.1:7946" {
		t.Fatalf("over the bound: %v", c3.Servers)
	}
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
	r := testReport(t, Config{Credential: Credential{Name: "pi4"}, Address: "10.0.0.5", KubeVersion: "v1.32.4"}, f)
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
