package benchkit

import (
	"context"
	"sync"
	"sync/atomic"
)

// Parallel calls op(ctx, i) for every i in [0, n) from workers goroutines,
// each taking the next i when its call returns, and returns when all have
// returned. Once ctx ends, no call starts.
func Parallel(ctx context.Context, n, workers int, op func(ctx context.Context, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				op(ctx, i)
			}
		})
	}
	wg.Wait()
}
