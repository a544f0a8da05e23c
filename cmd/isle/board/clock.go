package board

import (
	"context"
	"crypto/x509"
	"log/slog"
	"slices"
	"time"

	"github.com/isle-cluster/isle/hw/clock"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
)

// settleClock brings the board's clock up to the servers' time, before
// the board checks a certificate: it asks the servers at apiAddrs
// (through the CA of hash caHash) and, when none answers, takes the
// latest time it knows the time is not before (clock.Floor, with certs).
// It reports whether a server told the time.
func settleClock(ctx context.Context, cfg Config, caHash string, apiAddrs []string, certs ...*x509.Certificate) bool {
	if askTime(ctx, cfg, caHash, apiAddrs, slog.LevelWarn) {
		return true
	}
	cfg.Clock.Advance(clock.Floor(cfg.Logger, clock.Earliest(), cfg.DataDir, certs...), cfg.Logger)
	return false
}

// askTime brings the board's clock up to the first answer of the servers
// at apiAddrs, if one answers (a failure is logged at failLevel), and
// saves the time, so that a board that loses power before a clean stop
// starts from it next time.
func askTime(ctx context.Context, cfg Config, caHash string, apiAddrs []string, failLevel slog.Level) bool {
	if len(apiAddrs) == 0 {
		return false
	}
	log := cfg.Logger
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	r, err := bootstrap.ServerTime(tctx, caHash, apiAddrs, clock.Earliest())
	cancel()
	if err != nil {
		log.Log(ctx, failLevel, "clock: no server told its time", "err", err)
		return false
	}
	cfg.Clock.Advance(r, log)
	if err := clock.Save(cfg.DataDir, cfg.Clock.Now()); err != nil {
		log.Warn("clock: the time is not saved", "err", err)
	}
	return true
}

// askTimeUntilTold asks the servers g shows (but the board's own API,
// self) for their time every period until one tells it or ctx ends: a
// board that found no server at its start (after a power cut of the whole
// cluster the boards come up in any order) takes their time once they
// are up.
func askTimeUntilTold(ctx context.Context, cfg Config, caHash string, g *gossip.Gossip, self string, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		addrs := slices.DeleteFunc(bootstrap.APIAddrs(g.Members()), func(a string) bool { return a == self })
		if askTime(ctx, cfg, caHash, addrs, slog.LevelDebug) {
			return
		}
	}
}

// askTimeEvery is how often a board that no server told the time asks
// again.
const askTimeEvery = 10 * time.Second
