package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
	"github.com/isle-cluster/isle/node/netns"
)

// The bench's app: one hello replica on helloBoard, ready once /healthz
// answers, the ClusterIP Service hello (80 to the pod's 8080) and an
// Ingress of the default class sending /hello to it.
const (
	appManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: hello}
spec:
  replicas: 1
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec:
      nodeSelector: {kubernetes.io/hostname: ` + helloBoard + `}
      terminationGracePeriodSeconds: 1
      containers:
      - name: hello
        image: ` + islandbench.HelloImage + `
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /healthz, port: http}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: hello}
spec:
  selector: {app: hello}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: hello}
spec:
  rules:
  - http:
      paths:
      - {path: /hello, pathType: Prefix, backend: {service: {name: hello, port: {number: 80}}}}
`
	// helloPort is the pod's port.
	helloPort = 8080
	// appWithin bounds the wait for the app to answer by every path.
	appWithin = 2 * time.Minute
)

// app is the bench's app, ready: where to reach it from clientNS.
type app struct {
	clientNS    string     // the client board's own namespace
	podName     string     // the replica, whose name its answers carry
	podIP       netip.Addr // its pod IP
	clusterIP   netip.Addr // the Service's
	ingressAddr netip.Addr // the client board's LAN address: its ingress controller
	ingressPID  int        // the client board's isle process, the ingress controller's
}

// body is what every GET /hello must answer.
func (a app) body() string { return "hello from " + a.podName + "\n" }

// paths are the three ways to the replica, the baseline first.
func (a app) paths() []path {
	return []path{
		{name: "direct", ns: a.clientNS, url: fmt.Sprintf("http://%s/hello", netip.AddrPortFrom(a.podIP, helloPort)), body: a.body()},
		{name: "ClusterIP", ns: a.clientNS, url: fmt.Sprintf("http://%s/hello", a.clusterIP), body: a.body()},
		{name: "Ingress", ns: a.clientNS, url: fmt.Sprintf("http://%s/hello", a.ingressAddr), body: a.body(), cpu: procCPU(a.ingressPID)},
	}
}

// procCPU reads the CPU time (user and system) process pid has used.
func procCPU(pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("app: the CPU time of process %d: %w", pid, err)
		}
		return benchkit.CPUTime(stat)
	}
}

// startApp pushes the hello image, applies the app and waits until the
// replica is Ready, the Service's EndpointSlice has it as a ready
// endpoint, and every path answers GET /hello from the client board.
func startApp(ctx context.Context, st *island.State) (app, error) {
	client, err := st.Board(clientBoard)
	if err != nil {
		return app{}, err
	}
	if !client.Isle.Alive() {
		return app{}, fmt.Errorf("app: the isle process of %s (pid %d) has exited; see %s/%s/isle.log", clientBoard, client.Isle.PID, st.Dir, clientBoard)
	}
	a := app{clientNS: islandbench.BoardNS(clientBoard), ingressAddr: client.Addr, ingressPID: client.Isle.PID}
	if err := islandbench.PushHello(ctx, st, "linux/"+runtime.GOARCH); err != nil {
		return app{}, err
	}
	if _, err := islandbench.Kubectl(ctx, st, appManifest, "apply", "-f", "-"); err != nil {
		return app{}, err
	}
	deadline := time.Now().Add(appWithin)
	for {
		waiting, err := a.check(ctx, st)
		if err != nil {
			return app{}, err
		}
		if waiting == "" {
			slog.Info("app ready", "pod", a.podName, "podIP", a.podIP, "clusterIP", a.clusterIP, "ingress", a.ingressAddr)
			return a, nil
		}
		if time.Now().After(deadline) {
			return app{}, fmt.Errorf("app: not ready after %v: %s; see kubectl describe pod,svc,ingress and DIR/BOARD/isle.log", appWithin, waiting)
		}
		select {
		case <-ctx.Done():
			return app{}, fmt.Errorf("app: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// check fills in what it can learn of the app and says what it still
// waits for ("" for nothing); an error means the app cannot become ready.
func (a *app) check(ctx context.Context, st *island.State) (waiting string, err error) {
	var pods corev1.PodList
	if err := getJSON(ctx, st, &pods, "get", "pod", "-l", "app=hello", "-o", "json"); err != nil {
		return "", err
	}
	name, ip, waiting, err := readyPod(pods.Items, helloBoard)
	if err != nil || waiting != "" {
		return waiting, err
	}
	if a.podName, a.podIP = name, ip; !a.clusterIP.IsValid() {
		out, err := islandbench.Kubectl(ctx, st, "", "get", "service", "hello", "-o", "jsonpath={.spec.clusterIP}")
		if err != nil {
			return "", err
		}
		ip, err := netip.ParseAddr(strings.TrimSpace(string(out)))
		if err != nil || !ip.Is4() {
			return "", fmt.Errorf("app: Service hello: spec.clusterIP %q: want an IPv4 address", out)
		}
		a.clusterIP = ip
	}
	var eps discoveryv1.EndpointSliceList
	if err := getJSON(ctx, st, &eps, "get", "endpointslice", "-l", discoveryv1.LabelServiceName+"=hello", "-o", "json"); err != nil {
		return "", err
	}
	if !readyEndpoint(eps.Items, a.podIP) {
		return fmt.Sprintf("the EndpointSlice of Service hello to list %s as ready", a.podIP), nil
	}
	for _, p := range a.paths() {
		if err := p.get(ctx); err != nil {
			return fmt.Sprintf("the %s path to answer: %v", p.name, err), nil
		}
	}
	return "", nil
}

// getJSON runs kubectl with args and decodes its output into v.
func getJSON(ctx context.Context, st *island.State, v any, args ...string) error {
	out, err := islandbench.Kubectl(ctx, st, "", args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("app: kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// readyPod picks the app's replica out of items: one pod, not being
// deleted, on board, Ready, with an IPv4 pod IP. It says what it waits for
// if the pod is not there yet, and fails if it can never be.
func readyPod(items []corev1.Pod, board string) (name string, ip netip.Addr, waiting string, err error) {
	var live []corev1.Pod
	for _, p := range items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return "", ip, fmt.Sprintf("one pod of app=hello, not %d", len(live)), nil
	}
	p := live[0]
	switch {
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return "", ip, "", fmt.Errorf("app: pod %s ended (%s): %s", p.Name, p.Status.Phase, p.Status.Message)
	case p.Spec.NodeName == "":
		return "", ip, fmt.Sprintf("pod %s to be placed", p.Name), nil
	case p.Spec.NodeName != board:
		return "", ip, "", fmt.Errorf("app: pod %s runs on %s, want %s (its nodeSelector)", p.Name, p.Spec.NodeName, board)
	}
	ready := false
	for _, c := range p.Status.Conditions {
		ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}
	if !ready {
		return "", ip, fmt.Sprintf("pod %s to be Ready (%s)", p.Name, p.Status.Phase), nil
	}
	if ip, err = netip.ParseAddr(p.Status.PodIP); err != nil || !ip.Is4() {
		return "", netip.Addr{}, "", fmt.Errorf("app: pod %s: status.podIP %q: want an IPv4 address (is the pod network there?)", p.Name, p.Status.PodIP)
	}
	return p.Name, ip, "", nil
}

// readyEndpoint reports whether slices hold ip as a ready endpoint.
func readyEndpoint(slices []discoveryv1.EndpointSlice, ip netip.Addr) bool {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				if addr == ip.String() {
					return true
				}
			}
		}
	}
	return false
}

// get sends one GET over a fresh connection and checks the answer.
func (p path) get(ctx context.Context) error {
	tr := &http.Transport{DialContext: netns.Dialer(p.ns), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(io.LimitReader(resp.Body, maxBody))
	return checkAnswer(resp.StatusCode, b.Bytes(), err, p.body)
}
