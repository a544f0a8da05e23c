//go:build !linux

package clock

import (
	"errors"
	"time"
)

// setSystem is Linux's alone.
func setSystem(time.Time) error { return errors.ErrUnsupported }
