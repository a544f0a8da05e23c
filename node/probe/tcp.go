package probe

import (
	"context"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// doTCP runs a tcpSocket probe: Success if a connection opens.
func doTCP(ctx context.Context, a *corev1.TCPSocketAction, t Target, timeout time.Duration) (Result, string) {
	port, err := t.port(a.Port)
	if err != nil {
		return Unknown, "tcpSocket." + err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := t.dial()(ctx, "tcp", net.JoinHostPort(t.host(a.Host), strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error()
	}
	c.Close()
	return Success, ""
}
