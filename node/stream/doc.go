// Package stream is the node agent's streaming server, the part of the
// kubelet's port 10250 that the API server proxies kubectl logs, exec,
// attach and port-forward to. The paths and query parameters are the
// kubelet's, so that the proxy forwards them as they are:
//
//	GET /containerLogs/{namespace}/{pod}/{container}?follow=&tailLines=&previous=&timestamps=&sinceSeconds=&sinceTime=&limitBytes=&stream=
//	GET /exec/{namespace}/{pod}/{container}?command=a&command=b&stdin=&stdout=&stderr=&tty=
//	GET /attach/{namespace}/{pod}/{container}?stdin=&stdout=&stderr=&tty=
//	GET /portForward/{namespace}/{pod}   (SPDY: see portforward.go)
//
// Logs are plain text (read by package logs from the container's log files),
// flushed as they come when following, or WebSocket messages when the
// client asks for a WebSocket (binary.k8s.io, or base64.binary.k8s.io as
// base64 text). Exec and attach are WebSockets speaking the Kubernetes
// channel protocol v5.channel.k8s.io (or v4, or the first, channel.k8s.io,
// whose status channel carries only a failure's text): each
// binary message starts with its channel, 0 stdin, 1 stdout, 2 stderr,
// 3 status, 4 terminal size ({"Width":80,"Height":24}), and in v5 the
// message {255, channel} closes a channel (the client's stdin at its end).
// The session ends with a metav1.Status on channel 3: Success, or Failure
// with reason NonZeroExitCode and the exit code as an ExitCode cause, which
// kubectl turns into its own exit code. No message is written before the
// client has sent one or 20 ms have passed since the upgrade: kubectl 1.30
// to 1.33 read the connection before they have made their streams, and
// drop a message that comes in between with an error line ("Unknown
// stream id 1, discarding message"). Over SPDY/3.1 (kubectl up to 1.29,
// and later ones when a WebSocket is refused) exec and attach speak
// v4.channel.k8s.io: a stream for each channel, opened by the client (see
// spdy.go).
//
// Authentication and TLS are the http.Server's (client certificates); the
// pods and the container runtime are behind the Pods and Runtime interfaces.
package stream
