//go:build !unix

package wal

import "os"

// lockDir is a no-op where flock is not available.
func lockDir(*os.File) error { return nil }
