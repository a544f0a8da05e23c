package probe

import (
	"encoding/binary"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// grpcHealth is a gRPC health service written against the protocol (not
// with the gRPC library): service "" is SERVING, "down" NOT_SERVING,
// "unknown" sends an empty message (status 0, UNKNOWN), "unimplemented"
// answers status 12 in a trailers-only answer and "slow" never answers.
func grpcHealth(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ProtoMajor != 2, r.Method != http.MethodPost, r.URL.Path != "/grpc.health.v1.Health/Check",
			r.Header.Get("Content-Type") != "application/grpc", r.Header.Get("Te") != "trailers":
			t.Errorf("not a gRPC health call: %s %s %s %v", r.Proto, r.Method, r.URL.Path, r.Header)
			http.Error(w, "bad call", http.StatusBadRequest)
			return
		case r.Header.Get("User-Agent") != "kube-probe/1.33":
			t.Errorf("User-Agent %q", r.Header.Get("User-Agent"))
		}
		b, err := io.ReadAll(r.Body)
		if err != nil || len(b) < 5 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
			t.Errorf("bad request message %q, %v", b, err)
			return
		}
		var service string
		if m := b[5:]; len(m) > 0 {
			if m[0] != 0x0a || int(m[1]) != len(m)-2 {
				t.Errorf("bad HealthCheckRequest %q", m)
				return
			}
			service = string(m[2:])
		}
		w.Header().Set("Content-Type", "application/grpc")
		var msg []byte
		switch service {
		case "":
			msg = []byte{0x08, 1}
		case "down":
			msg = []byte{0x08, 2}
		case "unknown":
		case "unimplemented":
			w.Header().Set("Grpc-Status", "12")
			w.Header().Set("Grpc-Message", "unknown%20service")
			return
		case "slow":
			<-r.Context().Done()
			return
		}
		w.Header().Set("Trailer", "Grpc-Status")
		frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
		w.Write(append(frame, msg...))
		w.Header().Set("Grpc-Status", "0")
	})
}

func grpcProbe(t *testing.T, url, service string) *corev1.Probe {
	a := &corev1.GRPCAction{Port: int32(portOf(t, url))}
	if service != "" {
		a.Service = &service
	}
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: a}}
}

func TestGRPC(t *testing.T) {
	t.Parallel() // waits out a timeout
	s := httptest.NewUnstartedServer(grpcHealth(t))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	tests := []struct {
		service string
		want    Result
		msg     string
	}{
		{"", Success, ""},
		{"down", Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown", Failure, `service unhealthy (responded with "UNKNOWN")`},
		{"unimplemented", Failure, "does not implement the grpc health protocol (grpc.health.v1.Health): unknown service"},
		{"slow", Failure, "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run("service "+tt.service, func(t *testing.T) {
			r, msg := Do(t.Context(), grpcProbe(t, s.URL, tt.service), Target{}, nil)
			if r != tt.want || !strings.Contains(msg, tt.msg) || (tt.msg == "" && msg != "") {
				t.Errorf("Do = %v %q; want %v with %q", r, msg, tt.want, tt.msg)
			}
		})
	}
}

func TestGRPCTLS(t *testing.T) {
	s := httptest.NewUnstartedServer(grpcHealth(t))
	s.EnableHTTP2 = true
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the plain-text probe's bad handshake
	s.StartTLS()
	t.Cleanup(s.Close)
	p := grpcProbe(t, s.URL, "")
	mode := corev1.GRPCProbeModeTLS
	p.GRPC.Mode = &mode
	if r, msg := Do(t.Context(), p, Target{}, nil); r != Success {
		t.Errorf("Do = %v %q; want Success", r, msg)
	}
	// A plain-text probe of a TLS server fails.
	p.GRPC.Mode = nil
	if r, _ := Do(t.Context(), p, Target{}, nil); r != Failure {
		t.Errorf("plain-text probe of a TLS server: Do = %v; want Failure", r)
	}
	mode = "QUIC"
	p.GRPC.Mode = &mode
	if r, msg := Do(t.Context(), p, Target{}, nil); r != Unknown || !strings.Contains(msg, "grpc.mode") {
		t.Errorf("mode QUIC: Do = %v %q; want Unknown naming the field", r, msg)
	}
}

func TestHealthCheckStatus(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want uint64
		err  string
	}{
		{"serving", []byte{0, 0, 0, 0, 2, 0x08, 1}, 1, ""},
		{"empty: unknown", []byte{0, 0, 0, 0, 0}, 0, ""},
		{"length mismatch", []byte{0, 0, 0, 0, 9, 0x08, 1}, 0, "header says"},
		{"other fields skipped", []byte{0, 0, 0, 0, 11, 0x12, 2, 'h', 'i', 0x08, 2, 0x1d, 1, 2, 3, 4}, 2, ""},
		{"short", []byte{0, 0, 0}, 0, "shorter than"},
		{"compressed", []byte{1, 0, 0, 0, 0}, 0, "compressed"},
		{"bad length", []byte{0, 0, 0, 0, 4, 0x12, 9, 'h', 'i'}, 0, "bad length"},
		{"bad wire type", []byte{0, 0, 0, 0, 2, 0x0b, 1}, 0, "wire type 3"},
		{"truncated fixed", []byte{0, 0, 0, 0, 3, 0x1d, 1, 2}, 0, "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := healthCheckStatus(tt.b)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("healthCheckStatus = %d, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("healthCheckStatus = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
