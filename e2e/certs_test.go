package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/control/wire"
)

// certValidity is the servers' certificates' life in these tests
// (--cert-validity): renewed at three fifths of it, 18 s.
const certValidity = 30 * time.Second

// TestCertRenewal runs two servers on loopback whose certificates live
// 30 s, for 75 s: each renews its API serving certificate in place (new
// connections get a new one, an open connection goes on), the first
// renews the kubeconfig written with isle kubeconfig -o, which kubectl
// uses throughout without a failure, no process restarts, the metric and
// isle certs check show the certificates' lives.
func TestCertRenewal(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 2, "--cert-validity", certValidity.String())
	k := newKubectl(t, bin, c.members[0])
	pids := []int{c.members[0].cmd.Process.Pid, c.members[1].cmd.Process.Pid}
	ca, err := os.ReadFile(filepath.Join(c.members[0].dir, "pki/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)

	// An open connection, kept: HTTP/2 to the first server.
	kept := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: wire.APIServerName}, ForceAttemptHTTP2: true}
	defer kept.CloseIdleConnections()
	keptGet := func() (serial string, reused bool) {
		t.Helper()
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+c.members[0].apiAddr()+"/version", nil)
		resp, err := (&http.Client{Transport: kept, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("the kept connection: %v", err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.TLS.PeerCertificates[0].SerialNumber.String(), reused
	}
	keptSerial, _ := keptGet()

	// Each new connection's serving certificate, by server.
	served := func(m *member) *x509.Certificate {
		t.Helper()
		conn, err := tls.Dial("tcp", m.apiAddr(), &tls.Config{RootCAs: pool, ServerName: wire.APIServerName})
		if err != nil {
			t.Fatalf("TLS to %s: %v", m.name, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	serials := []map[string]bool{{}, {}}
	kubeconfigs := map[string]bool{}
	start := time.Now()
	for time.Since(start) < 75*time.Second {
		// kubectl re-reads the kubeconfig each time: its certificate of
		// 30 s must have been renewed for it to work after that.
		if out, errOut, err := k.run("", "get", "namespace", "default", "-o", "name"); err != nil || strings.TrimSpace(out) != "namespace/default" {
			t.Fatalf("kubectl after %v: %v %q %s", time.Since(start).Round(time.Second), err, out, errOut)
		}
		for i, m := range c.members {
			cert := served(m)
			if time.Until(cert.NotAfter) <= 0 || time.Until(cert.NotAfter) > certValidity {
				t.Fatalf("%s serves a certificate until %v, %v from now; want within %v", m.name, cert.NotAfter, time.Until(cert.NotAfter), certValidity)
			}
			serials[i][cert.SerialNumber.String()] = true
		}
		b, err := os.ReadFile(k.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kubeconfigs[string(b)] = true
		time.Sleep(500 * time.Millisecond)
	}
	if serial, reused := keptGet(); serial != keptSerial || !reused {
		t.Errorf("the kept connection: serial %s (was %s), reused %v; want the same connection and certificate", serial, keptSerial, reused)
	}
	for i, m := range c.members {
		// 75 s of 30 s certificates renewed every 18 s: at least four.
		if len(serials[i]) < 4 {
			t.Errorf("%s served %d serving certificates in 75 s, want at least 4", m.name, len(serials[i]))
		}
		if m.cmd.Process.Pid != pids[i] {
			t.Errorf("%s restarted", m.name)
		}
		select {
		case <-m.exited:
			t.Errorf("%s exited", m.name)
		default:
		}
	}
	if len(kubeconfigs) < 4 {
		t.Errorf("the kubeconfig was written %d times in 75 s, want at least 4", len(kubeconfigs)-1)
	}

	// The metric, on the first server's /metrics.
	resp, err := http.Get("http://" + c.members[0].storeAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for kind, maxLeft := range map[string]float64{"ca": 10 * 365 * 86400, "apiserver-serving": certValidity.Seconds(), "apiserver-node-client": certValidity.Seconds()} {
		m := regexp.MustCompile(`(?m)^` + wire.CertExpiryMetric + `\{certificate="` + kind + `"\} (\S+)$`).FindSubmatch(metrics)
		if m == nil {
			t.Errorf("no %s{certificate=%q} in /metrics", wire.CertExpiryMetric, kind)
			continue
		}
		if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v <= 0 || v > maxLeft {
			t.Errorf("%s{certificate=%q} = %s, want in (0, %v]", wire.CertExpiryMetric, kind, m[1], maxLeft)
		}
	}

	// isle certs check: every certificate, none expired.
	out, err := exec.Command(bin, "certs", "check", "--data-dir", c.members[0].dir).CombinedOutput()
	if err != nil {
		t.Fatalf("isle certs check: %v\n%s", err, out)
	}
	for _, want := range []string{"cluster CA", "API serving", "API client to boards", "kubeconfig"} {
		if !regexp.MustCompile(`(?m)^` + want + ` .* (OK|RENEW-SOON) `).Match(out) {
			t.Errorf("isle certs check shows no valid %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "EXPIRED") {
		t.Errorf("isle certs check:\n%s", out)
	}
	t.Logf("isle certs check:\n%s", out)
}

// TestCertRenewalIsland runs an island board with 40 s certificates and a
// pod: kubectl logs, which the API server proxies to the board's streaming
// server with its client certificate, works throughout 90 s while both
// certificates (and the island's kubeconfig, which kubectl uses) are
// renewed; isle certs check on the board lists the streaming server's.
func TestCertRenewalIsland(t *testing.T) {
	b := startPodBoard(t, "--cert-validity=40s")
	b.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: ticker}
spec:
  containers:
  - name: ticker
    image: %s
    command: ["sh", "-c", "while true; do echo tick; sleep 1; done"]
`, b.busybox))
	b.waitPod(t, "ticker", 60*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	data := filepath.Join(b.isl.dir, b.node, "data")
	files := map[string]map[string]bool{"node-serving.pem": {}, "pki/apiserver-node-client.crt": {}}
	start := time.Now()
	for time.Since(start) < 90*time.Second {
		if out, errOut, err := b.kubectl.run("", "logs", "ticker", "--tail=1"); err != nil || strings.TrimSpace(out) != "tick" {
			t.Fatalf("kubectl logs after %v: %v %q %s", time.Since(start).Round(time.Second), err, out, errOut)
		}
		for name, seen := range files {
			if c, err := os.ReadFile(filepath.Join(data, name)); err == nil {
				seen[string(c)] = true
			}
		}
		time.Sleep(time.Second)
	}
	for name, seen := range files {
		// 90 s of 40 s certificates renewed every 24 s: three at least.
		if len(seen) < 3 {
			t.Errorf("%s: %d certificates in 90 s, want at least 3", name, len(seen))
		}
	}
	out, err := exec.Command(b.isl.bin, "certs", "check", "--data-dir", data).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^streaming server +`+b.node+` .* (OK|RENEW-SOON) `).Match(out) {
		t.Fatalf("isle certs check: %v\n%s", err, out)
	}
}
