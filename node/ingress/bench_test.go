package ingress

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkProxy compares requests straight to a pod-like backend with
// requests through the controller's HTTP listener (the fast path) to it,
// over loopback with keep-alive connections. Compare the ns/op of the
// two.
// Client, proxy and backend share the machine's CPUs here, and the proxy
// does about the HTTP work of client and backend together, so proxy runs
// near half the direct rate at best.
func BenchmarkProxy(b *testing.B) {
	payload := strings.Repeat("x", 1024)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, payload)
	}))
	b.Cleanup(backend.Close)
	c := newController(b, slog.New(slog.DiscardHandler))
	c.Update(webSnapshot(b, addr(backend)))

	run := func(b *testing.B, url string) {
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		b.Cleanup(tr.CloseIdleConnections)
		client := &http.Client{Transport: tr}
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n != int64(len(payload)) {
					b.Errorf("got %d with %d bytes", resp.StatusCode, n)
					return
				}
			}
		})
	}
	b.Run("direct", func(b *testing.B) { run(b, backend.URL+"/") })
	b.Run("proxy", func(b *testing.B) { run(b, "http://"+c.httpAddr.String()+"/") })
}
