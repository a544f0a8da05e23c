package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// writeKubeconfig writes the administrator's client configuration as a
// kubeconfig at path, for `isle map`.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["isle"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile, Token: cfg.BearerToken}
	kc.Contexts["admin@isle"] = &clientcmdapi.Context{Cluster: "isle", AuthInfo: "admin"}
	kc.CurrentContext = "admin@isle"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// mapPrefix starts the line in which `isle map` says where it serves.
const mapPrefix = "The island's map: "

// mapProc is the `isle map` process.
type mapProc struct {
	*benchkit.Proc
	release func()
}

// stop stops isle map and lets its starting thread go.
func (m *mapProc) stop() {
	m.Stop(3 * time.Second)
	m.release()
}

// startMap runs `isle map` with the kubeconfig on a free loopback port,
// its output in dir/map.log, and returns it with the map's URL. The
// process is started from a goroutine locked to its OS thread until it is
// stopped: the kernel kills it (Pdeathsig) when the thread that started it
// ends, not the benchmark (https://go.dev/issue/27505).
func startMap(ctx context.Context, isle, kubeconfig, dir string) (*mapProc, string, error) {
	log := filepath.Join(dir, "map.log")
	type started struct {
		p   *benchkit.Proc
		err error
	}
	ch, release := make(chan started, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		p, err := benchkit.StartProc("isle map", log, isle, "map", "--kubeconfig", kubeconfig, "--address", "127.0.0.1:0")
		ch <- started{p, err}
		if err == nil {
			<-release
		}
	}()
	s := <-ch
	if s.err != nil {
		return nil, "", s.err
	}
	m := &mapProc{Proc: s.p, release: sync.OnceFunc(func() { close(release) })}
	var url string
	err := benchkit.WaitFor(ctx, 10*time.Second, "isle map's address", []*benchkit.Proc{m.Proc}, func(context.Context) error {
		b, err := os.ReadFile(log)
		if err != nil {
			return err
		}
		u, err := mapURL(string(b))
		url = u
		return err
	})
	if err != nil {
		m.stop()
		return nil, "", err
	}
	return m, url, nil
}

// mapURL finds the map's URL in isle map's output:
// "The island's map: http://127.0.0.1:PORT/isle/map/ (of …)".
func mapURL(out string) (string, error) {
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(line, mapPrefix)
		if !ok {
			continue
		}
		u, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/isle/map/") {
			return "", fmt.Errorf("isle map says %q", strings.TrimSpace(line))
		}
		return u, nil
	}
	return "", fmt.Errorf("isle map has not said where it serves yet")
}

// webBytes are the bytes of the map's files: as stored in dir, and as
// the map serves them (gzipped where it does).
type webBytes struct {
	files         int
	stored, wired int64
}

// readWeb sums the sizes of the files in dir and fetches each from the
// map at url.
func readWeb(ctx context.Context, dir, url string) (webBytes, error) {
	var w webBytes
	ents, err := os.ReadDir(dir)
	if err != nil {
		return w, fmt.Errorf("the map's files: %w", err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return w, err
		}
		w.files++
		w.stored += fi.Size()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+e.Name(), nil)
		if err != nil {
			return w, err
		}
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := hc.Do(req)
		if err != nil {
			return w, fmt.Errorf("fetch %s: %w", e.Name(), err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return w, fmt.Errorf("fetch %s: HTTP %d, %v", e.Name(), resp.StatusCode, err)
		}
		w.wired += n
	}
	return w, nil
}
