// Package hw reads what a board says of itself: its facts (architecture,
// CPUs, memory, kernel; from the device tree its model and serial; SoC
// temperature; the firmware's under-voltage and throttling report), its
// usage, and whether its memory cgroup is on. Its subpackage led drives the
// board's readiness and activity LEDs. It imports nothing of control or
// node; they call it.
package hw
