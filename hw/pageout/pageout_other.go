//go:build !linux

package pageout

import (
	"errors"
	"fmt"
)

// Result is what a Release did.
type Result struct {
	Advised, Before, After uint64
}

// Pages are found on Linux alone.
type Pages struct{}

// Find fails but on Linux.
func Find() (*Pages, error) {
	return nil, fmt.Errorf("pageout: %w", errors.ErrUnsupported)
}

// Release does nothing but on Linux.
func (*Pages) Release() (Result, error) {
	return Result{}, fmt.Errorf("pageout: %w", errors.ErrUnsupported)
}
