// Package hw drives a board's readiness and activity LEDs (GPIO through
// periph.io, or the on-board ACT/PWR LEDs through sysfs) and reads board
// facts (model, serial, temperature, throttling). It imports nothing of
// control or node; they call it.
//
// It is being built; see ARCHITECTURE.md for what exists today.
package hw
