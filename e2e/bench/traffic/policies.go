package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/nftables"
	vnetns "github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/node/proxy"
)

// The NetworkPolicy rules measure: a namespace of policyPods pods on the
// board, policyCount policies in it (each choosing a tenth of the pods,
// and letting in another tenth, a namespace's pods and an ipBlock), the
// pods of policyOthers namespaces on other boards, and policyUpdates
// updates, each timed from the Sync's call to its nftables commit: a
// policy's port changed, a pod relabelled (into other policies' peers and
// pods), a pod replaced by one with a new address, in turn.
const (
	policyPods    = 100
	policyCount   = 50
	policyOthers  = 5
	policyUpdates = 150
)

// timePolicySyncs times the updates with Policies of cfg, and checks that
// every pod of the namespace is isolated both ways after the first Sync
// and the last.
func timePolicySyncs(ctx context.Context, cfg proxy.Config) (update, cpu []time.Duration, err error) {
	pol, err := proxy.NewPolicies(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("policies: %w", err)
	}
	defer func() {
		if cerr := pol.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("policies: %w", cerr)
		}
	}()
	st := policyState(cfg.NodeName)
	if err := pol.Sync(st); err != nil {
		return nil, nil, fmt.Errorf("policies: %w", err)
	}
	if err := checkPolicyChains(cfg.Netns, policyPods); err != nil {
		return nil, nil, err
	}
	next := 0
	for i := range policyUpdates {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("policies: %w", err)
		}
		switch i % 3 {
		case 0:
			p := st.Policies[i%policyCount].DeepCopy()
			port := &p.Spec.Ingress[0].Ports[0]
			port.Port = ptrTo(intstr.FromInt32(port.Port.IntVal%1000 + 8001))
			st.Policies[i%policyCount] = p
		case 1:
			p := st.Pods[i%policyPods].DeepCopy()
			p.Labels["app"] = fmt.Sprintf("app-%d", (i/3)%10)
			st.Pods[i%policyPods] = p
		case 2:
			p := st.Pods[i%policyPods].DeepCopy()
			next++
			p.Name = fmt.Sprintf("%s-%d", p.Name, next)
			p.Status.PodIP = netip.AddrFrom4([4]byte{10, 42, 10, byte(next)}).String() // an address no pod had
			st.Pods[i%policyPods] = p
		}
		c, began := selfCPU(), time.Now()
		if err := pol.Sync(st); err != nil {
			return nil, nil, fmt.Errorf("policies: update %d: %w", i+1, err)
		}
		update, cpu = append(update, time.Since(began)), append(cpu, selfCPU()-c)
	}
	return update, cpu, checkPolicyChains(cfg.Netns, policyPods)
}

// policyState is the measured cluster: the namespace "class" on node,
// the others' pods elsewhere.
func policyState(node string) proxy.PolicyState {
	var st proxy.PolicyState
	st.Namespaces = append(st.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "class",
		Labels: map[string]string{corev1.LabelMetadataName: "class"}}})
	for i := range policyPods {
		st.Pods = append(st.Pods, benchPod("class", fmt.Sprintf("student-%d", i), node, fmt.Sprintf("app-%d", i%10),
			netip.AddrFrom4([4]byte{10, 42, 9, byte(2 + i)})))
	}
	for n := range policyOthers {
		ns := fmt.Sprintf("other-%d", n)
		st.Namespaces = append(st.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{corev1.LabelMetadataName: ns, "trusted": fmt.Sprint(n%2 == 0)}}})
		for i := range 40 {
			st.Pods = append(st.Pods, benchPod(ns, fmt.Sprintf("pod-%d", i), "other", fmt.Sprintf("app-%d", i%10),
				netip.AddrFrom4([4]byte{10, 42, byte(20 + n), byte(2 + i)})))
		}
	}
	tcp := corev1.ProtocolTCP
	for j := range policyCount {
		st.Policies = append(st.Policies, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: fmt.Sprintf("policy-%d", j)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", j%10)}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptrTo(intstr.FromInt32(int32(8000 + j)))}, {Protocol: &tcp, Port: ptrTo(intstr.FromString("http"))}},
					From: []networkingv1.NetworkPolicyPeer{
						{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", (j+1)%10)}}},
						{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"trusted": "true"}}},
						{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{fmt.Sprintf("192.168.%d.0/24", j)}}},
					},
				}},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", (j+2)%10)}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptrTo(intstr.FromString("http"))}},
				}},
			},
		})
	}
	return st
}

func benchPod(ns, name, node, app string, ip netip.Addr) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String()},
	}
}

func ptrTo[T any](v T) *T { return &v }

// checkPolicyChains checks that the policy table in the namespace at path
// holds want ingress and want egress chains: every pod isolated both ways.
func checkPolicyChains(path string, want int) error {
	h, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("policies: namespace %s: %w", path, err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return fmt.Errorf("policies: nftables: %w", err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("policies: nftables: list chains: %w", err)
	}
	in, out := 0, 0
	for _, ch := range chains {
		if ch.Table.Name != proxy.PolicyTableName {
			continue
		}
		switch {
		case strings.HasPrefix(ch.Name, "in-"):
			in++
		case strings.HasPrefix(ch.Name, "out-"):
			out++
		}
	}
	if in != want || out != want {
		return fmt.Errorf("policies: table %s holds %d ingress and %d egress chains, want %d of each", proxy.PolicyTableName, in, out, want)
	}
	return nil
}
