package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/registry"
)

// pods/log, pods/exec, pods/attach and pods/portforward are served by the node agent of the
// pod's board (package stream, on the port its Node reports in
// status.daemonEndpoints.kubeletEndpoint), as the kubelet serves them: the
// API server checks the request, finds the container and the node, and
// proxies the request to the agent over TLS with its client certificate
// (Config.NodeTLS), verifying the agent by its node's name. The query
// passes through as it is (previous=true, follow=true, command=...), the
// WebSocket or SPDY upgrade of exec, attach and port-forward too. The
// agent's error answers keep their code and text, wrapped in a Status for
// kubectl.

// Bounds of the exchange with a node agent.
const (
	nodeDialTimeout     = 5 * time.Second
	nodeResponseTimeout = 30 * time.Second
	maxNodeErrorBytes   = 64 << 10
)

// agentPaths are the agent's paths of the subresources.
var agentPaths = map[string]string{"log": "containerLogs", "exec": "exec", "attach": "attach", "portforward": "portForward"}

// serveNodeProxy serves an authorized pods/log, pods/exec, pods/attach or
// pods/portforward.
func (s *Server) serveNodeProxy(w http.ResponseWriter, r *http.Request, req request) {
	if (req.Subresource == "log" && r.Method != http.MethodGet) || (req.Subresource != "log" && req.Verb != "create") {
		s.writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/" + req.Subresource}, r.Method))
		return
	}
	if s.cfg.NodeTLS == nil {
		s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf(
			"pods/%s: this API server has no client certificate for the node agents", req.Subresource)))
		return
	}
	obj, err := s.store.Get(r.Context(), req.Resource, req.Namespace, req.Name, metav1.GetOptions{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pod := obj.(*corev1.Pod)
	if err := s.admitConnect(r, req, pod); err != nil {
		s.writeError(w, r, err)
		return
	}
	segs := []string{agentPaths[req.Subresource], pod.Namespace, pod.Name}
	if req.Subresource != "portforward" { // a pod's ports, not a container's
		container, err := podContainer(pod, r.URL.Query().Get("container"))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		segs = append(segs, container)
	}
	if pod.Spec.NodeName == "" {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	addr, err := s.agentAddr(r.Context(), pod.Spec.NodeName)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	target := &url.URL{Scheme: "https", Host: addr, RawQuery: r.URL.RawQuery}
	for _, seg := range segs {
		target.Path += "/" + seg
		target.RawPath += "/" + url.PathEscape(seg)
	}
	s.proxyToAgent(w, r, pod.Spec.NodeName, target)
}

// podContainer is the container a request names, or the pod's only one,
// with the Kubernetes API server's errors.
func podContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		names := func(cs []corev1.Container) string {
			var out []string
			for _, c := range cs {
				out = append(out, c.Name)
			}
			return strings.Join(out, " ")
		}
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		}
		msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, names(pod.Spec.Containers))
		if len(pod.Spec.InitContainers) > 0 {
			msg += fmt.Sprintf(" or one of the init containers: [%s]", names(pod.Spec.InitContainers))
		}
		return "", apierrors.NewBadRequest(msg)
	}
	named := func(c corev1.Container) bool { return c.Name == name }
	if slices.ContainsFunc(pod.Spec.Containers, named) || slices.ContainsFunc(pod.Spec.InitContainers, named) ||
		slices.ContainsFunc(pod.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return c.Name == name }) {
		return name, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// agentAddr is the host:port of a node's streaming server, from its Node's
// status: its InternalIP and its kubelet endpoint's port.
func (s *Server) agentAddr(ctx context.Context, node string) (string, error) {
	nodes := s.mustResource(corev1.SchemeGroupVersion.WithResource("nodes"))
	obj, err := s.store.Get(ctx, nodes, "", node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", badGateway(fmt.Sprintf("node %q is not in the cluster (kubectl get nodes)", node))
	}
	if err != nil {
		return "", err
	}
	n := obj.(*corev1.Node)
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 || port > 65535 {
		return "", badGateway(fmt.Sprintf("node %q reports no streaming port (status.daemonEndpoints.kubeletEndpoint.port %d): "+
			"its agent serves no logs, exec or attach", node, port))
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
			return "", badGateway(fmt.Sprintf("node %q reports InternalIP %q: want a unicast IP address", node, a.Address))
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(int(port))), nil
	}
	return "", badGateway(fmt.Sprintf("node %q reports no InternalIP address: its agent cannot be reached", node))
}

// proxyToAgent proxies r to the node agent at target.
func (s *Server) proxyToAgent(w http.ResponseWriter, r *http.Request, node string, target *url.URL) {
	tlsCfg := s.cfg.NodeTLS.Clone()
	tlsCfg.ServerName = node
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL, pr.Out.Host = target, ""
			if pr.Out.Method != http.MethodGet {
				// kubectl's SPDY requests POST; the agent answers
				// GETs.
				pr.Out.Method, pr.Out.Body, pr.Out.ContentLength = http.MethodGet, http.NoBody, 0
			}
			// The client's credentials are the API server's business.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Cookie")
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: nodeDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       tlsCfg,
			TLSHandshakeTimeout:   nodeDialTimeout,
			ResponseHeaderTimeout: nodeResponseTimeout,
			DisableKeepAlives:     true, // one session, one connection
		},
		FlushInterval:  -1, // logs as they come
		ModifyResponse: agentErrorStatus,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went
			}
			s.writeError(w, r, badGateway(fmt.Sprintf("node %q does not answer at %s (its agent's streaming server): %v",
				node, target.Host, unwrapURLError(err))))
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	p.ServeHTTP(w, r)
}

// unwrapURLError drops the *url.Error around a transport error, which
// repeats the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// agentErrorStatus turns an error answer of an agent that is not a Status
// (the agent answers in plain text, as the kubelet does) into a Status with
// its code and text, which kubectl shows as the Kubernetes API server's.
func agentErrorStatus(resp *http.Response) error {
	if resp.StatusCode < http.StatusBadRequest {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt == "application/json" {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeErrorBytes))
	_ = resp.Body.Close()
	msg := strings.TrimSpace(string(b))
	if err != nil || msg == "" {
		msg = "the node's agent answered " + resp.Status
	}
	st := statusOf(apierrors.NewGenericServerResponse(resp.StatusCode, "", schema.GroupResource{}, "", msg, 0, false))
	st.Message = msg
	body, _ := json.Marshal(st)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("Content-Type", "application/json")
	return nil
}

// badGateway is a node agent that cannot be reached (502, with no
// Retry-After: clients should not retry at once).
func badGateway(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadGateway, Message: msg}}
}

// admitConnect calls the admission webhooks on a pods/exec, attach or
// portforward (operation CONNECT), with the request's options.
func (s *Server) admitConnect(r *http.Request, req request, pod *corev1.Pod) error {
	hooks := s.store.Webhooks()
	if hooks == nil || req.Subresource == "log" {
		return nil
	}
	q := r.URL.Query()
	flag := func(name string) bool { v, _ := strconv.ParseBool(q.Get(name)); return v }
	var opts runtime.Object
	switch req.Subresource {
	case "exec":
		opts = &corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"}, Container: q.Get("container"),
			Command: q["command"], Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty")}
	case "attach":
		opts = &corev1.PodAttachOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodAttachOptions"}, Container: q.Get("container"),
			Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty")}
	default:
		pf := &corev1.PodPortForwardOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodPortForwardOptions"}}
		for _, p := range q["ports"] {
			if n, err := strconv.ParseInt(p, 10, 32); err == nil {
				pf.Ports = append(pf.Ports, int32(n))
			}
		}
		opts = pf
	}
	ar := &registry.AdmissionRequest{Resource: req.Resource, Subresource: req.Subresource, Operation: registry.OpConnect,
		Namespace: pod.Namespace, Name: pod.Name, Object: opts, Options: opts, User: registry.RequesterOf(r.Context())}
	if _, err := hooks.Mutate(r.Context(), ar); err != nil {
		return err
	}
	return hooks.Validate(r.Context(), ar)
}
