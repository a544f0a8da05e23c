package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The gRPC health protocol
// (https://github.com/grpc/grpc/blob/master/doc/health-checking.md) is one
// unary call, so it is spoken here directly: an HTTP/2 POST of one
// length-prefixed protobuf message, HealthCheckRequest{service = 1}, whose
// answer is HealthCheckResponse{status = 1} and a grpc-status trailer.
const (
	healthCheckPath = "/grpc.health.v1.Health/Check"
	grpcOK          = "0"
	grpcUnimpl      = "12"
	serving         = 1
)

// servingStatus names HealthCheckResponse.ServingStatus values.
var servingStatus = map[uint64]string{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

// doGRPC runs a grpc probe: Success if the pod's health service answers
// SERVING for the probe's service.
func doGRPC(ctx context.Context, a *corev1.GRPCAction, t Target, timeout time.Duration) (Result, string) {
	if a.Port < 1 || a.Port > 65535 {
		return Unknown, fmt.Sprintf("grpc.port %d: not in 1..65535", a.Port)
	}
	var protocols http.Protocols
	scheme := "http"
	switch {
	case a.Mode == nil || *a.Mode == "" || *a.Mode == corev1.GRPCProbeModePlaintext:
		protocols.SetUnencryptedHTTP2(true)
	case *a.Mode == corev1.GRPCProbeModeTLS:
		protocols.SetHTTP2(true)
		scheme = "https"
	default:
		return Unknown, fmt.Sprintf("grpc.mode %q: want Plaintext or TLS", *a.Mode)
	}
	var service string
	if a.Service != nil {
		service = *a.Service
	}
	addr := net.JoinHostPort(t.host(""), strconv.Itoa(int(a.Port)))

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+addr+healthCheckPath,
		bytes.NewReader(healthCheckRequest(service)))
	if err != nil {
		return Unknown, fmt.Sprintf("grpc: %v", err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Grpc-Timeout", strconv.FormatInt(timeout.Milliseconds(), 10)+"m")
	client := &http.Client{Transport: &http.Transport{
		DialContext: t.dial(),
		// As the kubelet: TLS without verification of the certificate.
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives:      true,
		Protocols:              &protocols,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, fmt.Sprintf("health rpc to %s failed: %v", addr, err)
	}
	defer resp.Body.Close()
	// Read to the end (the trailers come after the body), at most maxRead.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRead))
	if err != nil {
		return Failure, fmt.Sprintf("health rpc to %s failed: %v", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Failure, fmt.Sprintf("health rpc to %s failed: HTTP status %d", addr, resp.StatusCode)
	}
	code, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if code == "" { // a "trailers-only" answer: the status is in the headers
		code, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	switch code {
	case grpcOK:
	case grpcUnimpl:
		return Failure, "this server does not implement the grpc health protocol (grpc.health.v1.Health): " + msg
	case "":
		return Failure, fmt.Sprintf("health rpc to %s: no grpc-status in the answer", addr)
	default:
		return Failure, fmt.Sprintf("health rpc to %s failed: grpc status %s: %s", addr, code, msg)
	}
	status, err := healthCheckStatus(body)
	if err != nil {
		return Failure, fmt.Sprintf("health rpc to %s: %v", addr, err)
	}
	if status != serving {
		name, ok := servingStatus[status]
		if !ok {
			name = strconv.FormatUint(status, 10)
		}
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", name)
	}
	return Success, ""
}

// healthCheckRequest is the gRPC message of HealthCheckRequest{service}:
// an uncompressed flag, the length, then field 1 (a string) unless empty.
func healthCheckRequest(service string) []byte {
	var msg []byte
	if service != "" {
		msg = append(msg, 1<<3|2) // field 1, length-delimited
		msg = binary.AppendUvarint(msg, uint64(len(service)))
		msg = append(msg, service...)
	}
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// healthCheckStatus decodes the status (field 1, a varint) of a gRPC
// message holding a HealthCheckResponse; an absent field is 0 (UNKNOWN).
func healthCheckStatus(b []byte) (uint64, error) {
	if len(b) < 5 {
		return 0, errors.New("answer shorter than a gRPC message header")
	}
	if b[0] != 0 {
		return 0, errors.New("answer is compressed (not asked for)")
	}
	n := binary.BigEndian.Uint32(b[1:5])
	if uint64(n) != uint64(len(b)-5) {
		return 0, fmt.Errorf("answer of %d bytes, its header says %d", len(b)-5, n)
	}
	var status uint64
	for m := b[5:]; len(m) > 0; {
		tag, k := binary.Uvarint(m)
		if k <= 0 {
			return 0, errors.New("bad HealthCheckResponse: bad field tag")
		}
		m = m[k:]
		var skip int
		switch tag & 7 {
		case 0: // varint
			v, k := binary.Uvarint(m)
			if k <= 0 {
				return 0, errors.New("bad HealthCheckResponse: bad varint")
			}
			if tag>>3 == 1 {
				status = v
			}
			skip = k
		case 1: // 64-bit
			skip = 8
		case 2: // length-delimited
			l, k := binary.Uvarint(m)
			if k <= 0 || l > uint64(len(m)-k) {
				return 0, errors.New("bad HealthCheckResponse: bad length")
			}
			skip = k + int(l)
		case 5: // 32-bit
			skip = 4
		default:
			return 0, fmt.Errorf("bad HealthCheckResponse: wire type %d", tag&7)
		}
		if skip > len(m) {
			return 0, errors.New("bad HealthCheckResponse: truncated")
		}
		m = m[skip:]
	}
	return status, nil
}
