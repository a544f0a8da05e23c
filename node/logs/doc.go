// Package logs writes and reads container log files in the CRI log format,
// the format containerd's CRI plugin writes and the kubelet reads:
//
//	<timestamp> <stream> <tag> <content>\n
//
// where timestamp is RFC 3339 with nanoseconds in UTC, stream is "stdout"
// or "stderr", and tag is "F" for a full line or "P" for a part of a line.
// A line longer than MaxLineSize bytes is split into P records followed by a
// final F record; a last line without a newline when the container's output
// ends is written as a P record, as containerd does.
//
// A Writer writes one container's log, rotating it by size into path.1,
// path.2 and so on. Read shows a log (with its rotated predecessors) the way
// kubectl logs does, joining the parts of split lines, and can follow it as
// it grows, across rotations, until the container stops.
//
// Log files are input: a line that is not in the format is skipped and
// counted, never fatal.
package logs
