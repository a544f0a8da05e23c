package probe

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// portOf is the port of a test server's URL.
func portOf(t *testing.T, rawURL string) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func httpGet(port intstr.IntOrString, path string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: port, Path: path}}}
}

// recorder keeps the requests a test server saw.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *recorder) add(req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
}

func (r *recorder) all() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.reqs...)
}

// newHTTPServer serves /status/N (answers N), /redirect?to=URL (302 to
// URL), /loop (redirects to itself), /big (a 302 with 20 KiB of body and no
// Location) and /block (answers once the client gives up).
func newHTTPServer(t *testing.T) (*httptest.Server, *recorder) {
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		w.WriteHeader(http.StatusMultipleChoices)
		w.Write([]byte(strings.Repeat("x", 20<<10)))
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		<-r.Context().Done()
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s, rec
}

func TestHTTPStatus(t *testing.T) {
	s, rec := newHTTPServer(t)
	port := intstr.FromInt32(int32(portOf(t, s.URL)))
	tests := []struct {
		path string
		want Result
		msg  string // in the message
	}{
		{"/status/200", Success, ""},
		{"/status/204", Success, ""},
		{"/status/399", Success, "probe terminated redirects (HTTP 399)"},
		{"/status/400", Failure, "statuscode: 400"},
		{"/status/500", Failure, "statuscode: 500"},
		{"/redirect?to=/status/200", Success, ""},
		{"/redirect?to=/status/503", Failure, "statuscode: 503"},
		{"/redirect?to=http://other.invalid:" + port.String() + "/status/200", Success, "probe terminated redirects (HTTP 302)"},
		{"/loop", Failure, "stopped after 10 redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, msg := Do(t.Context(), httpGet(port, tt.path), Target{}, nil)
			if got != tt.want || !strings.Contains(msg, tt.msg) || (tt.msg == "" && msg != "") {
				t.Errorf("Do = %v %q; want %v with %q", got, msg, tt.want, tt.msg)
			}
		})
	}
	for _, r := range rec.all() {
		if r.Host == "other.invalid:"+port.String() {
			t.Errorf("followed a redirect to another host: %s", r.URL)
		}
	}
}

// TestHTTP199 answers with a bare 199 and closes: not a success (a Go
// server would turn a handler's 199 into an informational answer and 200).
func TestHTTP199(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 199 Odd\r\nContent-Length: 0\r\n\r\n"))
	}()
	port := intstr.FromInt32(int32(l.Addr().(*net.TCPAddr).Port))
	if got, msg := Do(t.Context(), httpGet(port, "/"), Target{}, nil); got != Failure {
		t.Errorf("Do = %v %q; want Failure", got, msg)
	}
}

func TestHTTPRequest(t *testing.T) {
	s, rec := newHTTPServer(t)
	port := portOf(t, s.URL)
	p := httpGet(intstr.FromString("web"), "/status/200?a=b")
	p.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "Host", Value: "app.example"}, {Name: "X-Probe", Value: "1"}}
	tgt := Target{PodIP: "127.0.0.1", Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53}, {Name: "web", ContainerPort: int32(port)}}}
	if got, msg := Do(t.Context(), p, tgt, nil); got != Success {
		t.Fatalf("Do = %v %q", got, msg)
	}
	p.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: "text/plain"}}
	if got, msg := Do(t.Context(), p, tgt, nil); got != Success {
		t.Fatalf("Do = %v %q", got, msg)
	}
	reqs := rec.all()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	checks := []struct{ what, got, want string }{
		{"Host", first.Host, "app.example"},
		{"query", first.URL.RawQuery, "a=b"},
		{"X-Probe", first.Header.Get("X-Probe"), "1"},
		{"User-Agent", first.Header.Get("User-Agent"), "kube-probe/1.33"},
		{"Accept", first.Header.Get("Accept"), "*/*"},
		{"Accept-Encoding", first.Header.Get("Accept-Encoding"), ""},
		{"User-Agent set", second.Header.Get("User-Agent"), "mine"},
		{"Accept set", second.Header.Get("Accept"), "text/plain"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if !first.Close || !second.Close {
		t.Error("requests without Connection: close; a probe's connection must not be kept")
	}
}

func TestHTTPBodyLimit(t *testing.T) {
	s, _ := newHTTPServer(t)
	got, msg := Do(t.Context(), httpGet(intstr.FromInt32(int32(portOf(t, s.URL))), "/big"), Target{}, nil)
	if got != Success {
		t.Fatalf("Do = %v %q; want Success (a warning)", got, msg)
	}
	if n := strings.Count(msg, "x"); n != maxRead {
		t.Errorf("message holds %d bytes of body, want %d", n, maxRead)
	}
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel() // waits out a timeout
	s, _ := newHTTPServer(t)
	p := httpGet(intstr.FromInt32(int32(portOf(t, s.URL))), "/block")
	p.TimeoutSeconds = 1
	got, msg := Do(t.Context(), p, Target{}, nil)
	if got != Failure || !strings.Contains(msg, "deadline exceeded") {
		t.Errorf("Do = %v %q; want Failure after the timeout", got, msg)
	}
}

func TestHTTPS(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(s.Close)
	p := httpGet(intstr.FromInt32(int32(portOf(t, s.URL))), "/")
	p.HTTPGet.Scheme = corev1.URISchemeHTTPS
	if got, msg := Do(t.Context(), p, Target{}, nil); got != Success {
		t.Errorf("Do = %v %q; want Success without verifying the certificate", got, msg)
	}
	p.HTTPGet.Scheme = "FTP"
	if got, msg := Do(t.Context(), p, Target{}, nil); got != Unknown || !strings.Contains(msg, "httpGet.scheme") {
		t.Errorf("Do with scheme FTP = %v %q; want Unknown naming the field", got, msg)
	}
}

// TestHTTPAddress checks where a probe connects, through a dialer that
// only records.
func TestHTTPAddress(t *testing.T) {
	tests := []struct {
		name  string
		host  string
		podIP string
		port  intstr.IntOrString
		ports []corev1.ContainerPort
		want  string
	}{
		{"loopback by default", "", "", intstr.FromInt32(8080), nil, "127.0.0.1:8080"},
		{"pod IP", "", "10.42.0.7", intstr.FromInt32(80), nil, "10.42.0.7:80"},
		{"own host", "192.0.2.1", "10.42.0.7", intstr.FromInt32(80), nil, "192.0.2.1:80"},
		{"IPv6 pod", "", "fd00::7", intstr.FromInt32(80), nil, "[fd00::7]:80"},
		{"named port", "", "", intstr.FromString("metrics"), []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}, "127.0.0.1:9100"},
		{"number as name", "", "", intstr.FromString("81"), nil, "127.0.0.1:81"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				got = append(got, network+" "+addr)
				return nil, &net.OpError{Op: "dial", Err: errRefused}
			}
			p := httpGet(tt.port, "/")
			p.HTTPGet.Host = tt.host
			tgt := Target{PodIP: tt.podIP, Ports: tt.ports, Dial: dial}
			if r, msg := Do(t.Context(), p, tgt, nil); r != Failure {
				t.Errorf("Do = %v %q; want Failure", r, msg)
			}
			if len(got) != 1 || got[0] != "tcp "+tt.want {
				t.Errorf("dialed %q, want [tcp %s]", got, tt.want)
			}
		})
	}
}

func TestBadSpecs(t *testing.T) {
	tcp := func(port intstr.IntOrString) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}}
	}
	two := httpGet(intstr.FromInt32(80), "/")
	two.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}
	tests := []struct {
		name string
		p    *corev1.Probe
		tgt  Target
		msg  string
	}{
		{"nil", nil, Target{}, "no probe"},
		{"no handler", &corev1.Probe{}, Target{}, "has 0 of"},
		{"two handlers", two, Target{}, "has 2 of"},
		{"unknown port name", httpGet(intstr.FromString("web"), "/"), Target{}, `httpGet.port "web": the container has no port of that name`},
		{"port 0", tcp(intstr.FromInt32(0)), Target{}, "tcpSocket.port 0: 0 is not in 1..65535"},
		{"port too big", tcp(intstr.FromInt32(70000)), Target{}, "not in 1..65535"},
		{"bad pod IP", tcp(intstr.FromInt32(80)), Target{PodIP: "pod.local"}, `pod IP "pod.local": not an IP address`},
		{"bad path", httpGet(intstr.FromInt32(80), "/%zz"), Target{}, "httpGet.path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dial := func(context.Context, string, string) (net.Conn, error) {
				t.Error("dialed for a bad spec")
				return nil, errRefused
			}
			tt.tgt.Dial = dial
			r, msg := Do(t.Context(), tt.p, tt.tgt, nil)
			if r != Unknown || !strings.Contains(msg, tt.msg) {
				t.Errorf("Do = %v %q; want Unknown with %q", r, msg, tt.msg)
			}
		})
	}
}
