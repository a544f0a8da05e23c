//go:build !arm

package hw

func goarm() int { return 0 }
