package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/hw/led"
)

// AnnotationLEDReady is the pattern of the board's readiness LED
// (led.State.Pattern: off, slow-blink, fast-blink, solid-dip, solid, solid-leader),
// for dashboards. The agent writes it when the pattern changes, so it is
// what the board last told: a board that died keeps its last pattern, and
// its Node's Ready condition says it is gone.
const AnnotationLEDReady = "isle.dev/led-ready"

// publishLEDs keeps the Node's AnnotationLEDReady on the readiness LED's
// pattern until ctx ends, retrying a failed write with back-off. The Board
// is never waited on: its watcher only records the pattern.
func (a *Agent) publishLEDs(ctx context.Context, b *led.Board) {
	var current atomic.Value // string
	changed := make(chan struct{}, 1)
	b.Watch(func(st led.State) {
		if p := st.Pattern(); current.Swap(p) != p {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	posted, backoff := "", 200*time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		for p := current.Load().(string); p != posted; p = current.Load().(string) {
			if err := a.annotateLEDs(ctx, p); err != nil {
				if ctx.Err() != nil {
					return
				}
				a.log.Log(ctx, retryLevel(err), "agent: LED pattern not written to the Node; retrying", "err", err, "in", backoff)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			posted, backoff = p, 200*time.Millisecond
		}
	}
}

// annotateLEDs writes pattern to the Node's AnnotationLEDReady.
func (a *Agent) annotateLEDs(ctx context.Context, pattern string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationLEDReady: pattern}}})
	if err != nil {
		return fmt.Errorf("annotate Node: %w", err)
	}
	name := a.cfg.Credential.Name
	if err := a.client.Patch(types.MergePatchType).Resource("nodes").Name(name).Body(patch).Do(ctx).Error(); err != nil {
		return fmt.Errorf("annotate Node %s: %w", name, err)
	}
	return nil
}
