package main

import (
	"fmt"
	"os"
	"time"

	"github.com/isle-cluster/isle/hw/clock"
)

// testClockOffset shifts a board's clock for isle alone, for tests of a
// board whose clock is wrong: "-8760h" starts it a year behind. A time
// namespace cannot shift CLOCK_REALTIME, and a test must not set the
// machine's clock: with it, isle corrects only its own clock.
const testClockOffset = "ISLE_TEST_CLOCK_OFFSET"

// boardClock is the system clock, or the one testClockOffset asks for.
func boardClock() (*clock.Clock, error) {
	s, ok := os.LookupEnv(testClockOffset)
	if !ok || s == "" {
		return clock.System(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: want a duration such as -8760h: %w", testClockOffset, s, err)
	}
	return clock.Shifted(d), nil
}
