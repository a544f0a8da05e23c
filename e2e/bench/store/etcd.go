package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// etcdCluster is three etcd processes in a static cluster on loopback,
// driven through the v3 JSON gateway that etcd 3.4 serves on its client URL.
type etcdCluster struct {
	members []*etcdMember
	hc      *http.Client
}

type etcdMember struct {
	name, clientURL string
	p               *benchkit.Proc
}

func (c *etcdCluster) system() string { return "etcd" }

func (c *etcdCluster) procs() []*benchkit.Proc {
	var ps []*benchkit.Proc
	for _, m := range c.members {
		ps = append(ps, m.p)
	}
	return ps
}

func (c *etcdCluster) metricsURLs() []string {
	var us []string
	for _, m := range c.members {
		us = append(us, m.clientURL+"/metrics")
	}
	return us
}

func (c *etcdCluster) fsyncMetric() string { return "etcd_disk_wal_fsync_duration_seconds" }

// snapshotBytesMetric: etcd's state is its bbolt file, written in place
// (counted in its disk bytes, with no counter of its own).
func (c *etcdCluster) snapshotBytesMetric() string { return "" }

// put is POST /v3/kv/put with base64 key and value.
func (c *etcdCluster) put(ctx context.Context, i int, key string, value []byte) error {
	enc := base64.StdEncoding
	body := make([]byte, 0, 32+enc.EncodedLen(len(key))+enc.EncodedLen(len(value)))
	body = append(body, `{"key":"`...)
	body = enc.AppendEncode(body, []byte(key))
	body = append(body, `","value":"`...)
	body = enc.AppendEncode(body, value)
	body = append(body, `"}`...)
	_, err := c.post(ctx, c.members[i].clientURL+"/v3/kv/put", body)
	return err
}

// post sends a JSON body and returns the 200 answer's body.
func (c *etcdCluster) post(ctx context.Context, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("etcd: POST %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd: POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("etcd: POST %s: read answer: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd: POST %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}

// startEtcd starts e1..e3 as a new static cluster with default fsync
// behaviour and waits until every member is healthy and sees three
// members. ports: three client, three peer.
func startEtcd(ctx context.Context, ws *workspace, bin string, ports []int, hc *http.Client) (*etcdCluster, error) {
	c := &etcdCluster{hc: hc}
	// The peer links are mutual TLS, as isle's Raft links are.
	certs, err := peerCerts(filepath.Join(ws.dir, "etcd-pki"), 3)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	var initial []string
	for i := range 3 {
		initial = append(initial, fmt.Sprintf("e%d=https://127.0.0.1:%d", i+1, ports[3+i]))
	}
	token := "storebench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range 3 {
		name := "e" + strconv.Itoa(i+1)
		dir := filepath.Join(ws.dir, "etcd-"+name)
		m := &etcdMember{name: name, clientURL: "http://127.0.0.1:" + strconv.Itoa(ports[i])}
		peerURL := "https://127.0.0.1:" + strconv.Itoa(ports[3+i])
		p, err := ws.start("etcd-"+name, etcdEnv(), bin,
			"--name", name, "--data-dir", dir,
			"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", token,
			"--peer-cert-file", certs.cert[i], "--peer-key-file", certs.key[i], "--peer-trusted-ca-file", certs.ca, "--peer-client-cert-auth",
			"--logger", "zap", "--log-outputs", "stderr")
		if err != nil {
			return nil, fmt.Errorf("start etcd: %w", err)
		}
		m.p = p
		c.members = append(c.members, m)
	}
	if err := benchkit.WaitFor(ctx, 60*time.Second, "etcd: 3 healthy members", c.procs(), c.ready); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	slog.Info("etcd ready", "client", c.members[0].clientURL+" "+c.members[1].clientURL+" "+c.members[2].clientURL)
	return c, nil
}

// ready holds when every member reports health and lists three members.
func (c *etcdCluster) ready(ctx context.Context) error {
	for _, m := range c.members {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.clientURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return err
		}
		var h struct {
			Health string `json:"health"`
		}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || h.Health != "true" {
			return fmt.Errorf("%s: /health says %q (%v)", m.name, h.Health, err)
		}
		data, err := c.post(ctx, m.clientURL+"/v3/cluster/member/list", []byte("{}"))
		if err != nil {
			return err
		}
		var list struct {
			Members []json.RawMessage `json:"members"`
		}
		if err := json.Unmarshal(data, &list); err != nil || len(list.Members) != 3 {
			return fmt.Errorf("%s lists %d members (%v)", m.name, len(list.Members), err)
		}
	}
	return nil
}

// etcdEnv is our environment without ETCD_* variables (etcd reads its
// flags from them too), plus what etcd 3.4 needs on less common CPUs.
func etcdEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "arm64", "ppc64le", "s390x":
	default:
		env = append(env, "ETCD_UNSUPPORTED_ARCH="+runtime.GOARCH)
	}
	return env
}

// peerPKI is a CA and a certificate per member, in files.
type peerPKI struct {
	ca        string
	cert, key []string
}

// peerCerts writes to dir a new CA and n member certificates for
// 127.0.0.1, each for both ends of a peer link (P-256, as isle's).
func peerCerts(dir string, n int) (peerPKI, error) {
	var out peerPKI
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return out, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return out, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "storebench etcd CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return out, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) (string, error) {
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	if out.ca, err = write("ca.crt", "CERTIFICATE", caDER); err != nil {
		return out, err
	}
	for i := range n {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return out, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: fmt.Sprintf("e%d", i+1)},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return out, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return out, err
		}
		certPath, err := write(fmt.Sprintf("e%d.crt", i+1), "CERTIFICATE", der)
		if err != nil {
			return out, err
		}
		keyPath, err := write(fmt.Sprintf("e%d.key", i+1), "EC PRIVATE KEY", keyDER)
		if err != nil {
			return out, err
		}
		out.cert, out.key = append(out.cert, certPath), append(out.key, keyPath)
	}
	return out, nil
}
