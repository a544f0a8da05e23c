package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/isle-cluster/isle/hw/led"
)

// The Node's annotation follows the readiness LED's pattern, one write per
// pattern (not per blink), and a failed write is made again.
func TestPublishLEDs(t *testing.T) {
	a, api, _ := pressureAgent(t, io.Discard)
	if err := a.register(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := led.NewBoard(&led.Virtual{}, &led.Virtual{}, nil, slog.New(slog.DiscardHandler))
	defer b.Close()
	b.SetReadiness(led.Ready)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.publishLEDs(ctx, b)
	}()
	defer func() { cancel(); <-done }()
	annotation := func() string {
		api.mu.Lock()
		defer api.mu.Unlock()
		return api.node.Annotations[AnnotationLEDReady]
	}
	wait := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for annotation() != want {
			if time.Now().After(deadline) {
				t.Fatalf("annotation %s = %q, want %q", AnnotationLEDReady, annotation(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait("solid")

	b.SetReadiness(led.NotReady)
	wait("fast-blink")
	time.Sleep(600 * time.Millisecond) // four blinks
	for range 20 {
		b.Activity()
	}
	api.mu.Lock()
	api.failPatches = 2
	api.mu.Unlock()
	b.SetReadiness(led.Ready)
	b.SetLeader(true)
	wait("solid-leader")

	api.mu.Lock()
	patches, failed := api.patches, api.failPatches
	api.mu.Unlock()
	// solid, fast-blink, then solid-leader (or solid first, if the watcher
	// saw the two changes apart).
	if patches < 3 || patches > 4 || failed != 0 {
		t.Errorf("%d patches taken and %d failures left, want 3 or 4 (one per pattern) after 2 failures", patches, failed)
	}
}
