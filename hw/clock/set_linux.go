package clock

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// setSystem sets CLOCK_REALTIME, which needs CAP_SYS_TIME.
func setSystem(t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("clock_settime: %w", err)
	}
	return nil
}
