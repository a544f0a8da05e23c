package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/isle-cluster/isle/control/backup"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/storeapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// backupObjects are the objects the backup test checks: every one of them
// comes back with its UID.
const backupObjects = "namespaces,configmaps,secrets,deployments,services,ingresses"

// objectUIDs lists the objects of kinds as kind/namespace/name@uid lines.
func objectUIDs(t *testing.T, k *kubectlRunner, kinds string) []string {
	t.Helper()
	out := k.ok(t, "get", kinds, "-A", "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}@{.metadata.uid}{"\n"}{end}`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(lines)
	return lines
}

// TestBackupRestore backs up a running island with objects and the hello
// app from a server that may be a follower, stops every board, empties the
// servers, restores the backup on pi1 (after the refusals: a data
// directory in use or holding a server, a corrupt file, a file of another
// cluster), starts pi1, lets pi2 and pi3 join it afresh and the agent come
// back with its credential, and checks that every object is back with its
// UID, a write after the backup is not, and the app serves again.
func TestBackupRestore(t *testing.T) {
	isl := startIsland(t, 3, 1)
	k := isl.kubectl
	isl.apply(t, fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {color: blue, size: "42"}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
stringData: {password: hunter2-backup-secret}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello}
spec:
  replicas: 2
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec:
      containers:
      - name: hello
        image: %s
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 2}
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
`, isl.hello))
	helloURL := "http://" + isl.boardAddr("pi4") + "/hello"
	serving := func() bool {
		out, err := exec.Command("curl", "-s", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", helloURL).Output()
		return err == nil && string(out) == "200"
	}
	waitFor(t, 3*time.Minute, "the hello app serving "+helloURL, serving)
	for i := range 20 {
		k.ok(t, "create", "configmap", fmt.Sprintf("cm-%02d", i), "-n", "shop", fmt.Sprintf("--from-literal=n=%d", i))
	}
	before := objectUIDs(t, k, backupObjects)
	token, err := isl.state.Token()
	if err != nil {
		t.Fatal(err)
	}

	// Saved on pi2, through its loopback store address, while the cluster runs.
	file := filepath.Join(t.TempDir(), "cluster.snapshot")
	out, err := exec.Command("ip", "netns", "exec", "isle-pi2", isl.bin, "snapshot", "save", file, "--socket", isl.adminSocket("pi2")).CombinedOutput()
	if err != nil {
		t.Fatalf("isle snapshot save on pi2: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	mustMatch(t, "snapshot save", string(out), `saved .*cluster\.snapshot: cluster [0-9a-f]+, revision \d+, \d+ bytes, written by pi2`)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("hunter2-backup-secret")) || bytes.Contains(data, []byte("aHVudGVyMi1iYWNrdXAtc2VjcmV0")) {
		t.Fatal("the Secret's value is in the backup in clear")
	}
	k.ok(t, "create", "configmap", "after-backup", "-n", "shop")

	restore := func(dir, file, token string) (string, error) {
		out, err := exec.Command(isl.bin, "snapshot", "restore", file, "--data-dir", dir, "--token", token).CombinedOutput()
		return string(out), err
	}
	dataDir := func(name string) string { return filepath.Join(isl.dir, name, "data") }
	t.Run("refusals", func(t *testing.T) {
		if out, err := restore(dataDir("pi3"), file, token); err == nil || !strings.Contains(out, "is in use by a running server") {
			t.Errorf("restore into a running server's directory: %v\n%s", err, out)
		}
		// A damaged byte near the end: the refusal names the offset of
		// the (one) chunk holding it.
		hl := int(binary.LittleEndian.Uint32(data[12:]))
		chunk := 16 + hl + 4
		bad := bytes.Clone(data)
		bad[len(bad)-100] ^= 0x40
		badFile := filepath.Join(t.TempDir(), "corrupt.snapshot")
		if err := os.WriteFile(badFile, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s is corrupt at offset %d", badFile, chunk)
		if out, err := restore(t.TempDir(), badFile, token); err == nil || !strings.Contains(out, want) {
			t.Errorf("restore of a corrupt file: %v\n%s\nwant %q", err, out, want)
		}
		other := otherClusterBackup(t)
		if out, err := restore(t.TempDir(), other, token); err == nil || !strings.Contains(out, "is a backup of cluster 0ther") {
			t.Errorf("restore of another cluster's file: %v\n%s", err, out)
		}
		parts := strings.Split(token, "::")
		wrong := parts[0] + "::" + parts[1] + "::" + strings.Repeat("a", len(parts[2]))
		if out, err := restore(t.TempDir(), file, wrong); err == nil || !strings.Contains(out, "does not open the file") {
			t.Errorf("restore with a wrong token secret: %v\n%s", err, out)
		}
	})

	for _, b := range []string{"pi4", "pi3", "pi2", "pi1"} {
		isl.board(t, "stop", b)
	}
	if out, err := restore(dataDir("pi1"), file, token); err == nil || !strings.Contains(out, "holds a server already") {
		t.Errorf("restore into a stopped server's directory: %v\n%s", err, out)
	}
	for _, b := range []string{"pi1", "pi2", "pi3"} {
		if err := os.RemoveAll(dataDir(b)); err != nil {
			t.Fatal(err)
		}
	}
	out2, err := restore(dataDir("pi1"), file, token)
	if err != nil {
		t.Fatalf("isle snapshot restore: %v\n%s", err, out2)
	}
	t.Logf("%s", out2)
	isl.board(t, "start", "pi1")
	isl.board(t, "start", "pi2")
	isl.board(t, "start", "pi3")
	isl.board(t, "start", "pi4")
	waitReady(t, k)

	after := objectUIDs(t, k, backupObjects)
	for _, o := range before {
		if !slices.Contains(after, o) {
			t.Errorf("%s is not back after the restore", o)
		}
	}
	if _, _, err := k.run("", "get", "configmap", "after-backup", "-n", "shop"); err == nil {
		t.Error("a ConfigMap written after the backup is in the restored cluster")
	}
	if got := k.ok(t, "get", "secret", "db", "-n", "shop", "-o", "jsonpath={.data.password}"); got != "aHVudGVyMi1iYWNrdXAtc2VjcmV0" {
		t.Errorf("the Secret's value after the restore: %q", got)
	}
	// The other servers joined afresh: three voters again, under a new
	// cluster ID; the agent kept its credential.
	waitFor(t, 2*time.Minute, "three store voters", func() bool {
		out, err := exec.Command("ip", "netns", "exec", "isle-pi1", isl.bin, "store", "status", "--json", "--socket", isl.adminSocket("pi1")).Output()
		if err != nil {
			return false
		}
		var st struct {
			ClusterID uint64 `json:"clusterID"`
			Members   []struct {
				Learner bool `json:"learner"`
			} `json:"members"`
		}
		if jsonUnmarshal(string(out), &st) != nil || fmt.Sprintf("%x", st.ClusterID) == backupCluster(t, data) {
			return false
		}
		voters := 0
		for _, m := range st.Members {
			if !m.Learner {
				voters++
			}
		}
		return voters == 3
	})
	waitFor(t, 2*time.Minute, "every Node Ready", func() bool {
		out, _, err := k.run("", "get", "nodes", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return err == nil && strings.Count(out, "True") == 4
	})
	waitFor(t, 3*time.Minute, "the hello app serving again", serving)
	k.ok(t, "create", "configmap", "after-restore", "-n", "shop")
}

// waitReady waits until the API server answers /readyz (its store has a
// leader and is in sync).
func waitReady(t *testing.T, k *kubectlRunner) {
	t.Helper()
	waitFor(t, 60*time.Second, "the API ready", func() bool {
		_, _, err := k.run("", "get", "--raw", "/readyz")
		return err == nil
	})
}

// backupCluster is the cluster ID in a backup's header.
func backupCluster(t *testing.T, data []byte) string {
	t.Helper()
	f, err := backup.Parse("backup", data)
	if err != nil {
		t.Fatal(err)
	}
	return f.Header.ClusterID
}

// otherClusterBackup writes a backup of another cluster (its own CA and
// token) and returns its path.
func otherClusterBackup(t *testing.T) string {
	t.Helper()
	ca, err := pki.NewCA("isle-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := pki.Seal(ca.Signer().KeyPEM, tok.Secret, pki.InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h := backup.Header{ClusterID: "0ther", Member: "x1", Revision: 1, Created: time.Now(), Servers: []string{"x1"},
		CAHash: tok.CAHash, CACert: ca.CertPEM(), CAKeySealed: sealed}
	if err := backup.Write(&buf, h, []byte("state"), tok.Secret); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other.snapshot")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestForceNewCluster runs three servers on loopback (the first writing
// scheduled backups), kills two of them for good, and recovers the third
// with --force-new-cluster: every object is there, it takes writes as the
// one store member of a new cluster, and a new server joins it.
func TestForceNewCluster(t *testing.T) {
	bs := newBoards(t)
	backups := t.TempDir()
	f1 := bs.add("f1", "server", "127.0.0.71", "--init", "--snapshot-dir", backups, "--snapshot-interval", "1s", "--snapshot-keep", "2")
	bs.waitToken(f1)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if out, err := bs.run("kubeconfig", "--data-dir", f1.dir, "-o", kc); err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, out)
	}
	k := &kubectlRunner{bin: kubectlBin(t), home: t.TempDir(), kubeconfig: kc}
	f2 := bs.add("f2", "server", "127.0.0.72", "--join", "127.0.0.71", "--token", bs.token)
	f3 := bs.add("f3", "server", "127.0.0.73", "--join", "127.0.0.71", "--token", bs.token)
	voters := func(b *board) (int, string) {
		out, err := bs.run("store", "status", "--json", "--socket", b.socket())
		if err != nil {
			return 0, ""
		}
		var st struct {
			ClusterID uint64 `json:"clusterID"`
			Members   []struct {
				Learner bool `json:"learner"`
			} `json:"members"`
		}
		if jsonUnmarshal(out, &st) != nil {
			return 0, ""
		}
		n := 0
		for _, m := range st.Members {
			if !m.Learner {
				n++
			}
		}
		return n, fmt.Sprintf("%x", st.ClusterID)
	}
	waitFor(t, 60*time.Second, "three voters", func() bool { n, _ := voters(f1); return n == 3 })
	for i := range 10 {
		k.ok(t, "create", "configmap", fmt.Sprintf("keep-%d", i), "--from-literal=n=x")
	}
	before := objectUIDs(t, k, "configmaps,namespaces,services")

	t.Run("scheduled backups", func(t *testing.T) {
		var names []string
		waitFor(t, 20*time.Second, "two scheduled backups kept", func() bool {
			names, _ = filepath.Glob(filepath.Join(backups, "isle-f1-*.snapshot"))
			return len(names) == 2
		})
		var later []string
		waitFor(t, 20*time.Second, "two newer backups, the older ones removed", func() bool {
			later, _ = filepath.Glob(filepath.Join(backups, "isle-f1-*.snapshot"))
			return len(later) == 2 && later[0] > names[1]
		})
		f, err := backup.ReadFile(later[1])
		if err != nil {
			t.Fatal(err)
		}
		if f.Header.Member != "f1" || len(f.Header.Servers) != 3 {
			t.Fatalf("scheduled backup header: %+v", f.Header)
		}
	})
	// isle snapshot save works on loopback too (the store address given).
	if out, err := bs.run("snapshot", "save", filepath.Join(t.TempDir(), "f3.snapshot"), "--socket", f3.socket()); err != nil {
		t.Fatalf("snapshot save on f3: %v\n%s", err, out)
	}

	_, oldCluster := voters(f1)
	f2.kill(t)
	f3.kill(t)
	if _, _, err := k.run("", "create", "configmap", "no-quorum", "--request-timeout", "5s"); err == nil {
		t.Fatal("a write succeeded without a quorum")
	}
	f1.kill(t)
	f1.args = append(f1.args, "--force-new-cluster")
	f1.start(t)
	waitFor(t, 60*time.Second, "f1 alone in a new cluster", func() bool {
		n, id := voters(f1)
		return n == 1 && id != "" && id != oldCluster
	})
	waitReady(t, k)
	after := objectUIDs(t, k, "configmaps,namespaces,services")
	for _, o := range before {
		if !slices.Contains(after, o) {
			t.Errorf("%s is gone after --force-new-cluster", o)
		}
	}
	k.ok(t, "create", "configmap", "after-recovery")
	if log, _ := os.ReadFile(f1.logPath); !strings.Contains(string(log), "forced a new cluster with this member as its only voter") {
		t.Error("f1 did not log the forced new cluster")
	}
	// The lost servers' names are taken by their old credentials until
	// removed; a new server joins under a new name.
	if out, err := bs.run("member", "remove", "f2", "--data-dir", f1.dir); err != nil {
		t.Fatalf("member remove f2: %v\n%s", err, out)
	}
	bs.add("f4", "server", "127.0.0.74", "--join", "127.0.0.71", "--token", bs.token)
	waitFor(t, 60*time.Second, "f4 a voter", func() bool { n, _ := voters(f1); return n == 2 })
	// Restarted with the flag left on its command line, f1 does not
	// force again (which would drop f4).
	_, forced := voters(f1)
	f1.kill(t)
	f1.start(t)
	waitFor(t, 60*time.Second, "f1 back with f4, in the same cluster", func() bool {
		n, id := voters(f1)
		return n == 2 && id == forced
	})
	if log, _ := os.ReadFile(f1.logPath); !strings.Contains(string(log), "not forcing a new cluster again") {
		t.Error("f1 did not say why it ignored --force-new-cluster")
	}
}

// TestAdminSocketClosed probes a server's administration API as the issue
// of the store's open debug API did: it is a unix socket only root may
// open, nothing answers on the old loopback TCP port, and without --debug
// the store's keys and the profiles are not served.
func TestAdminSocketClosed(t *testing.T) {
	requireRoot(t)
	bs := newBoards(t)
	s1 := bs.add("s1", "server", "127.0.0.61", "--init")
	bs.waitToken(s1)
	sock := s1.socket()
	waitFor(t, 30*time.Second, "the admin socket answering", func() bool {
		_, err := bs.run("store", "status", "--socket", sock)
		return err == nil
	})
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("the admin socket: %v, mode %v; want a socket of mode 0600", err, fi.Mode())
	}
	// A user other than root: the kernel refuses the connection.
	out, err := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", bs.bin, "store", "status", "--socket", sock).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "permission denied") {
		t.Errorf("isle store status as nobody: %v\n%s\nwant permission denied", err, out)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.61:6444", time.Second); err == nil {
		c.Close()
		t.Error("something answers on 127.0.0.61:6444, the old store address")
	}
	// Without --debug: no keys, no profiles.
	if out, err := bs.run("store", "get", "/registry/core/secrets/kube-system/x", "--socket", sock); err == nil || !strings.Contains(out, "--debug") {
		t.Errorf("isle store get without --debug: %v\n%s\nwant a refusal naming --debug", err, out)
	}
	if out, err := bs.run("store", "put", "/registry/x", "v", "--socket", sock); err == nil || !strings.Contains(out, "--debug") {
		t.Errorf("isle store put without --debug: %v\n%s\nwant a refusal naming --debug", err, out)
	}
	resp, err := (&http.Client{Transport: storeapi.UnixTransport(sock)}).Get("http://isle/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without --debug: %s, want 404", resp.Status)
	}
}

// TestRequestFlood sends a server a JSON patch of chained copies, then
// 2,000 slow requests at once with a
// node's credential (lists at a revision not reached yet, which wait 3 s),
// as the probe that found no bound did: some are answered 429 with
// Retry-After, the server's memory grows by less than 64 MiB, and an
// administrator's requests are answered within a second throughout.
func TestRequestFlood(t *testing.T) {
	requireRoot(t)
	bs := newBoards(t)
	s1 := bs.add("s1", "server", "127.0.0.62", "--init")
	bs.waitToken(s1)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if out, err := bs.run("kubeconfig", "--data-dir", s1.dir, "-o", kc); err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, out)
	}
	cs := kubeClient(t, kc)
	waitFor(t, 60*time.Second, "s1's Node", func() bool { _, ok := nodeMap(t, cs)["s1"]; return ok })
	// The leader makes the system namespaces once elected, beside the
	// board's registration: the Node can come first.
	waitFor(t, 30*time.Second, "the default namespace", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil
	})
	cred, _, err := wire.LoadCredential(s1.dir)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cred.CACert)
	rss := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s1.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb << 10
			}
		}
		return 0
	}
	before := rss()

	// A JSON patch of chained copies, each doubling the object: it once
	// drove a server past 3 GB. Now refused (422) once the copies add up
	// to 3 MiB.
	if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "seed"},
		Data: map[string]string{"a": strings.Repeat("x", 1024)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for i := range 40 {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/data","path":"/data/c%d"}`, i))
	}
	t0 := time.Now()
	_, err = cs.CoreV1().ConfigMaps("default").Patch(context.Background(), "seed", types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), metav1.PatchOptions{})
	if took := time.Since(t0); !apierrors.IsInvalid(err) || took > time.Second || !strings.Contains(err.Error(), "accumulated") {
		t.Errorf("the chained copies: %v after %v, want a 422 naming the accumulated copies within a second", err, took)
	}
	if grow := rss() - before; grow > 64<<20 {
		t.Errorf("the server's RSS grew by %d MiB with the chained copies, want under 64", grow>>20)
	}

	const n = 2000
	codes := make(chan int, n)
	var retryAfter atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: wire.APIServerName}, DisableKeepAlives: true}
			<-start
			req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.62:6443/api/v1/nodes?resourceVersion=999999999", nil)
			req.Header.Set("Authorization", "Bearer "+cred.NodeToken)
			resp, err := (&http.Client{Transport: tr, Timeout: 60 * time.Second}).Do(req)
			if err != nil {
				codes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" {
				retryAfter.Add(1)
			}
			codes <- resp.StatusCode
		}()
	}
	// The administrator, meanwhile: a request every 100 ms.
	done := make(chan struct{})
	var slowest time.Duration
	var adminErr error
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			t0 := time.Now()
			if _, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
				adminErr = err
				return
			}
			slowest = max(slowest, time.Since(t0))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	close(start)
	wg.Wait()
	<-done
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	after := rss()
	t.Logf("answers %v (429 with Retry-After: %d); the administrator's slowest of 50 lists: %v; RSS %d → %d MiB", count, retryAfter.Load(), slowest, before>>20, after>>20)
	if retryAfter.Load() == 0 {
		t.Errorf("no request of %d answered 429 with Retry-After", n)
	}
	if count[0] > n/10 || count[http.StatusGatewayTimeout]+count[http.StatusTooManyRequests] < n*9/10 {
		t.Errorf("answers %v: want each a 504 (the revision not reached) or a 429", count)
	}
	if adminErr != nil || slowest > time.Second {
		t.Errorf("the administrator during the flood: %v, slowest list %v, want every one within a second", adminErr, slowest)
	}
	if grow := after - before; grow > 64<<20 {
		t.Errorf("the server's RSS grew by %d MiB during the flood, want under 64", grow>>20)
	}
}
