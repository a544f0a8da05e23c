package benchkit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

func TestParallel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, workers int
	}{
		{"more work than workers", 1000, 8},
		{"more workers than work", 3, 16},
		{"no work", 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]atomic.Int32, tc.n)
			var mu sync.Mutex
			running, most := 0, 0
			Parallel(context.Background(), tc.n, tc.workers, func(_ context.Context, i int) {
				mu.Lock()
				running++
				most = max(most, running)
				mu.Unlock()
				calls[i].Add(1)
				mu.Lock()
				running--
				mu.Unlock()
			})
			for i := range calls {
				if n := calls[i].Load(); n != 1 {
					t.Fatalf("op(%d) called %d times, want once", i, n)
				}
			}
			if most > tc.workers {
				t.Fatalf("%d calls ran at once, want at most %d", most, tc.workers)
			}
		})
	}
}

func TestParallelStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	Parallel(ctx, 1000, 4, func(context.Context, int) {
		// >=, not ==: under user-mode emulation of armv6, two cores' atomic
		// adds can both see the same value, and none the tenth.
		if calls.Add(1) >= 10 {
			cancel()
		}
	})
	// Workers that had taken an index when the tenth call cancelled may
	// still have made their call.
	if n := calls.Load(); n < 10 || n > 13 {
		t.Fatalf("%d calls, want 10 to 13", n)
	}
}
