package board

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/isle-cluster/isle/hw/clock"
	"github.com/isle-cluster/isle/node/bootstrap"
)

// settleClock brings the board's clock up to the servers' time, before
// the board checks a certificate: it asks the servers at apiAddrs
// (through the CA of hash caHash) and, when none answers, takes the
// latest time it knows the time is not before (clock.Floor, with certs).
// It saves the time a server told, so that a board that loses power
// before a clean stop starts from it next time.
func settleClock(ctx context.Context, cfg Config, caHash string, apiAddrs []string, certs ...*x509.Certificate) {
	log := cfg.Logger
	earliest := clock.Earliest()
	var r clock.Reading
	if len(apiAddrs) > 0 {
		tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		var err error
		r, err = bootstrap.ServerTime(tctx, caHash, apiAddrs, earliest)
		cancel()
		if err == nil {
			cfg.Clock.Advance(r, log)
			if err := clock.Save(cfg.DataDir, cfg.Clock.Now()); err != nil {
				log.Warn("clock: the time is not saved", "err", err)
			}
			return
		}
		log.Warn("clock: no server told its time; the clock is checked against what the board knows", "err", err)
	}
	cfg.Clock.Advance(clock.Floor(log, earliest, cfg.DataDir, certs...), log)
}
