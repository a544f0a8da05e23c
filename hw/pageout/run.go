package pageout

import (
	"context"
	"log/slog"
	"time"
)

// Run finds the executable's pages (Find) and releases them after first,
// and then every period until ctx ends. It logs the first release, and
// failures, which it goes on after (the next may succeed); the others at
// debug level.
func Run(ctx context.Context, first, period time.Duration, log *slog.Logger) {
	t := time.NewTimer(first)
	defer t.Stop()
	var pages *Pages
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var r Result
		var err error
		if pages == nil {
			pages, err = Find()
		}
		if pages != nil {
			r, err = pages.Release()
		}
		switch {
		case err != nil:
			log.Warn("pageout: the binary's unused pages are not released", "err", err)
		default:
			level := slog.LevelDebug
			if n == 0 {
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "pageout: the binary's unused pages released", "advised", r.Advised,
				"rssFileBefore", r.Before, "rssFileAfter", r.After)
		}
		t.Reset(period)
	}
}
