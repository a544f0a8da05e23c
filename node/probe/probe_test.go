package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/node/netns/nstest"
)

var errRefused = errors.New("connection refused (test)")

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{Unknown: "Unknown", Success: "Success", Failure: "Failure", Result(9): "Unknown"} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}

func TestTCP(t *testing.T) {
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open.Close() })
	tcp := func(addr string) *corev1.Probe {
		_, port, _ := net.SplitHostPort(addr)
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.Parse(port)}}}
	}
	if r, msg := Do(t.Context(), tcp(open.Addr().String()), Target{}, nil); r != Success {
		t.Errorf("open port: Do = %v %q; want Success", r, msg)
	}
	if r, msg := Do(t.Context(), tcp(nstest.ClosedAddr(t)), Target{}, nil); r != Failure || !strings.Contains(msg, "refused") {
		t.Errorf("closed port: Do = %v %q; want Failure, refused", r, msg)
	}
}

func TestTCPTimeout(t *testing.T) {
	t.Parallel() // waits out a timeout
	var deadline, called time.Time
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		called = time.Now()
		deadline, _ = ctx.Deadline()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
	start := time.Now()
	if r, msg := Do(t.Context(), p, Target{Dial: dial}, nil); r != Failure || !strings.Contains(msg, "deadline exceeded") {
		t.Errorf("Do = %v %q; want Failure, deadline exceeded", r, msg)
	}
	// The deadline is set between the start and the dial, one second
	// ahead (a pause between them under emulation moves both).
	if deadline.Before(start.Add(time.Second)) || deadline.After(called.Add(time.Second)) {
		t.Errorf("dial deadline %v after the start, %v after the dial, want 1s (timeoutSeconds)", deadline.Sub(start), deadline.Sub(called))
	}
}

// fakeExec answers ExecSync from a script: each call takes the next entry
// (the last one repeats).
type fakeExec struct {
	script []execAnswer
	mu     sync.Mutex
	calls  []execCall
}

type execAnswer struct {
	code  int
	out   string
	err   error
	block bool // wait for ctx to end, then return its error
}

type execCall struct {
	id      string
	cmd     []string
	timeout time.Duration
}

func (f *fakeExec) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, execCall{id, cmd, timeout})
	a := f.script[min(len(f.calls), len(f.script))-1]
	f.mu.Unlock()
	if a.block {
		<-ctx.Done()
		return -1, nil, fmt.Errorf("exec in %s: %w", id, ctx.Err())
	}
	return a.code, []byte(a.out), a.err
}

// count is how many commands ran.
func (f *fakeExec) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func execProbe(cmd ...string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}
}

func TestExec(t *testing.T) {
	t.Parallel() // waits out a timeout
	tests := []struct {
		name   string
		answer execAnswer
		want   Result
		msg    string
	}{
		{"exit 0", execAnswer{code: 0, out: "fine\n"}, Success, ""},
		{"exit 1", execAnswer{code: 1, out: "database down\n"}, Failure, `command ["check"] exited with 1: database down`},
		{"timeout", execAnswer{block: true}, Failure, "command timed out after 1s"},
		{"runtime error", execAnswer{err: errors.New("no such container")}, Unknown, "no such container"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := &fakeExec{script: []execAnswer{tt.answer}}
			r, msg := Do(t.Context(), execProbe("check"), Target{ContainerID: "c1"}, ex)
			if r != tt.want || !strings.Contains(msg, tt.msg) || (tt.msg == "" && msg != "") {
				t.Errorf("Do = %v %q; want %v with %q", r, msg, tt.want, tt.msg)
			}
			if len(ex.calls) != 1 || ex.calls[0].id != "c1" || ex.calls[0].cmd[0] != "check" || ex.calls[0].timeout != time.Second {
				t.Errorf("calls %+v; want one of check in c1 with 1s", ex.calls)
			}
		})
	}
}

func TestExecOutputLimit(t *testing.T) {
	ex := &fakeExec{script: []execAnswer{{code: 2, out: strings.Repeat("y", 3*maxRead)}}}
	r, msg := Do(t.Context(), execProbe("check"), Target{ContainerID: "c1"}, ex)
	if r != Failure || strings.Count(msg, "y") != maxRead {
		t.Errorf("Do = %v with %d bytes of output; want Failure with %d", r, strings.Count(msg, "y"), maxRead)
	}
}

func TestExecBadSpecs(t *testing.T) {
	ex := &fakeExec{script: []execAnswer{{}}}
	for _, tt := range []struct {
		name string
		p    *corev1.Probe
		tgt  Target
		ex   Execer
		msg  string
	}{
		{"no command", execProbe(), Target{ContainerID: "c1"}, ex, "exec.command is empty"},
		{"no execer", execProbe("true"), Target{ContainerID: "c1"}, nil, "no runtime"},
		{"no container", execProbe("true"), Target{}, ex, "no container ID"},
	} {
		if r, msg := Do(t.Context(), tt.p, tt.tgt, tt.ex); r != Unknown || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: Do = %v %q; want Unknown with %q", tt.name, r, msg, tt.msg)
		}
	}
	if len(ex.calls) != 0 {
		t.Errorf("ran %d commands for bad specs", len(ex.calls))
	}
}
