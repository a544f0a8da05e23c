package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
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
	resp, err := http.Get("http://" + c.members[0].metricsAddr + "/metrics")
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

// TestCARotation replaces the cluster CA of an island of one server and
// two agents with isle certs rotate-ca while kubectl writes ConfigMaps and
// reads a pod's logs in a loop: no request fails; an agent that is off
// holds the rotation in its first phase, which goes on once it is back; a
// join pinning the old CA works before the new one signs and is refused,
// saying why, after; at the end every board, the server's files and the
// recorded kubeconfig trust the new CA alone, and the server's token
// carries its hash.
func TestCARotation(t *testing.T) {
	isl := startIsland(t, 1, 2)
	k := isl.kubectl
	isl.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: ticker}
spec:
  nodeName: pi2
  containers:
  - name: ticker
    image: %s
    command: ["sh", "-c", "while true; do echo tick; sleep 1; done"]
`, isl.busybox))
	isl.waitRunning(t, 90*time.Second, "ticker")
	data := filepath.Join(isl.dir, "pi1", "data")
	oldTok := readToken(t, data)

	// The client: a write and a read of the logs a second, counted.
	stop := make(chan struct{})
	done := make(chan []string)
	go func() {
		var failures []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- failures
				return
			case <-time.After(time.Second):
			}
			if _, errOut, err := k.run("", "create", "configmap", fmt.Sprintf("during-%d", i)); err != nil {
				failures = append(failures, fmt.Sprintf("create configmap: %v %s", err, errOut))
			}
			if out, errOut, err := k.run("", "logs", "ticker", "--tail=1"); err != nil || strings.TrimSpace(out) != "tick" {
				failures = append(failures, fmt.Sprintf("logs: %v %q %s", err, out, errOut))
			}
		}
	}()

	isl.board(t, "stop", "pi3")
	rotate := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", "isle-pi1", isl.bin, "certs", "rotate-ca", "--socket", isl.adminSocket("pi1")}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("isle certs rotate-ca %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Logf("%s", rotate("--no-wait"))
	if out, err := exec.Command("ip", "netns", "exec", "isle-pi1", isl.bin, "certs", "rotate-ca", "--no-wait", "--socket", isl.adminSocket("pi1")).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "under way") {
		t.Errorf("a second rotation while one is under way: %v\n%s\nwant a refusal saying one is under way", err, out)
	}
	waitFor(t, 90*time.Second, "the rotation held in its first phase by the board that is off, and it alone", func() bool {
		st := rotate("--status")
		return strings.Contains(st, "phase "+wire.CAPhaseTrustBoth) && strings.Contains(st, "waiting for board pi3: does not trust the new CA yet") &&
			strings.Count(st, "waiting for") == 1
	})
	// A board that joins now with the old token finds the CA it pins.
	if err := pinnedHandshake(oldTok, "10.77.0.11:6443"); err != nil {
		t.Errorf("a join with the old token while both CAs are trusted: %v", err)
	}
	time.Sleep(5 * time.Second)
	if st := rotate("--status"); !strings.Contains(st, "phase "+wire.CAPhaseTrustBoth) {
		t.Fatalf("the rotation went on while pi3 was off:\n%s", st)
	}
	isl.board(t, "start", "pi3")
	waitFor(t, 180*time.Second, "the rotation done", func() bool {
		return strings.Contains(rotate("--status"), "phase "+wire.CAPhaseDone)
	})
	final := rotate("--status")
	t.Logf("%s", final)
	if b, err := os.ReadFile(filepath.Join(isl.dir, "pi1", "isle.log")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "CA replacement") || strings.Contains(l, "CAs changed") {
				t.Logf("pi1: %s", l)
			}
		}
	}
	close(stop)
	if failures := <-done; len(failures) > 0 {
		t.Errorf("%d requests failed during the rotation:\n%s", len(failures), strings.Join(failures, "\n"))
	}

	newTok := readToken(t, data)
	if newTok.CAHash == oldTok.CAHash || newTok.Secret != oldTok.Secret {
		t.Errorf("the server's token after the rotation: hash %s (before %s), same secret %v; want a new hash and the same secret", newTok.CAHash, oldTok.CAHash, newTok.Secret == oldTok.Secret)
	}
	if !strings.Contains(final, newTok.String()) {
		t.Errorf("rotate-ca --status does not print the new token %s", newTok)
	}
	caPEM, err := os.ReadFile(filepath.Join(data, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if ca, err := wire.ParseCertPEM(caPEM); err != nil || wire.CAHash(ca) != newTok.CAHash {
		t.Errorf("pki/ca.crt after the rotation: %v, want the new CA %s", err, newTok.CAHash)
	}
	for _, b := range []string{"pi1", "pi2", "pi3"} {
		cred, _, err := wire.LoadCredential(filepath.Join(isl.dir, b, "data"))
		if err != nil {
			t.Fatal(err)
		}
		certs, err := wire.ParseCertsPEM(cred.CACert)
		if err != nil || len(certs) != 1 || wire.CAHash(certs[0]) != newTok.CAHash {
			t.Errorf("%s trusts %v (%v), want the new CA alone", b, wire.CAHashes(certs), err)
		}
	}
	kc, err := os.ReadFile(isl.state.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kc), "certificate-authority-data: "+base64PEM(caPEM)) {
		t.Errorf("the recorded kubeconfig does not trust the new CA alone:\n%s", kc)
	}
	// The old token no longer finds its CA, and says why.
	if err := pinnedHandshake(oldTok, "10.77.0.11:6443"); err == nil || !strings.Contains(err.Error(), "rotate-ca") {
		t.Errorf("a join with the old token after the rotation: %v, want a refusal that names a replaced CA", err)
	}
	if err := pinnedHandshake(newTok, "10.77.0.11:6443"); err != nil {
		t.Errorf("a join with the new token: %v", err)
	}
	if out, errOut, err := k.run("", "logs", "ticker", "--tail=1"); err != nil || strings.TrimSpace(out) != "tick" {
		t.Errorf("kubectl logs after the rotation: %v %q %s", err, out, errOut)
	}
	out, err := exec.Command(isl.bin, "certs", "check", "--data-dir", filepath.Join(isl.dir, "pi2", "data")).CombinedOutput()
	if err != nil || strings.Count(string(out), "cluster CA") != 1 {
		t.Errorf("isle certs check on pi2: %v\n%s\nwant one cluster CA", err, out)
	}
}

func readToken(t *testing.T, data string) wire.Token {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wire.ParseToken(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// pinnedHandshake makes the TLS handshake a joining board makes with tok
// (its CA pinned by hash) to the API server at addr, from the island's
// LAN.
func pinnedHandshake(tok wire.Token, addr string) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, wire.PinnedClientConfig(tok.CAHash, "", time.Now))
	if err != nil {
		// What the server sent, to tell why.
		var chain []string
		if c, derr := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}); derr == nil {
			for _, pc := range c.ConnectionState().PeerCertificates {
				chain = append(chain, fmt.Sprintf("%s (CA %v, key %s, signed by %x)", pc.Subject.CommonName, pc.IsCA, wire.CAHash(pc), pc.AuthorityKeyId))
			}
			c.Close()
		}
		return fmt.Errorf("%w; the server's chain: %s", err, strings.Join(chain, ", "))
	}
	return c.Close()
}

// base64PEM is data as a kubeconfig's -data field holds it.
func base64PEM(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
