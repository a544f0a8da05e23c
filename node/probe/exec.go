package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// doExec runs an exec probe: Success if the command exits 0.
func doExec(ctx context.Context, a *corev1.ExecAction, t Target, ex Execer, timeout time.Duration) (Result, string) {
	switch {
	case len(a.Command) == 0:
		return Unknown, "exec.command is empty"
	case ex == nil:
		return Unknown, "exec probe: no runtime to run it"
	case t.ContainerID == "":
		return Unknown, "exec probe: no container ID"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, out, err := ex.ExecSync(ctx, t.ContainerID, a.Command, timeout)
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)):
		return Failure, fmt.Sprintf("command timed out after %v", timeout)
	case err != nil:
		return Unknown, fmt.Sprintf("exec %q: %v", a.Command, err)
	case code != 0:
		return Failure, fmt.Sprintf("command %q exited with %d: %s", a.Command, code, bytes.TrimSpace(truncate(out)))
	}
	return Success, ""
}
