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

// Release does nothing but on Linux.
func Release() (Result, error) {
	return Result{}, fmt.Errorf("pageout: %w", errors.ErrUnsupported)
}
