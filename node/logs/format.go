package logs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// MaxLineSize is the longest content of one record; longer lines are split
// into P records. It is containerd's default max_container_log_line_size.
const MaxLineSize = 16 * 1024

// The stream names of the format.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// timeFormat is RFC 3339 with a fixed nine-digit fraction (like containerd),
// so every record's header has the same length. time.RFC3339Nano parses it.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// streamID indexes the two streams in arrays.
type streamID int

const (
	stdoutID streamID = iota
	stderrID
	numStreams
)

var streamNames = [numStreams]string{Stdout, Stderr}

const (
	tagFull    = 'F'
	tagPartial = 'P'
)

// record is one parsed line of a log file. content aliases the read buffer.
type record struct {
	time    time.Time
	stream  streamID
	partial bool
	content []byte
}

// appendRecord appends one record to buf: header, the content a then b
// (the two parts of a line, to spare a copy), and the newline.
func appendRecord(buf []byte, t time.Time, s streamID, tag byte, a, b []byte) []byte {
	buf = t.UTC().AppendFormat(buf, timeFormat)
	buf = append(buf, ' ')
	buf = append(buf, streamNames[s]...)
	buf = append(buf, ' ', tag, ' ')
	buf = append(buf, a...)
	buf = append(buf, b...)
	return append(buf, '\n')
}

// recordLen is the length appendRecord adds for content of n bytes.
func recordLen(s streamID, n int) int {
	const tsLen = len("2006-01-02T15:04:05.000000000Z")
	return tsLen + 1 + len(streamNames[s]) + 3 + n + 1
}

var errNoField = errors.New("missing field")

// parseRecord parses one line of a log file, without its newline. Like the
// kubelet, it reads the first ':'-separated element of the tag field.
func parseRecord(line []byte) (record, error) {
	var rec record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return rec, fmt.Errorf("timestamp: %w", errNoField)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return rec, fmt.Errorf("timestamp: %w", err)
	}
	rec.time = t
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return rec, fmt.Errorf("stream: %w", errNoField)
	}
	switch string(stream) {
	case Stdout:
		rec.stream = stdoutID
	case Stderr:
		rec.stream = stderrID
	default:
		return rec, fmt.Errorf("stream %q: want stdout or stderr", stream)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return rec, fmt.Errorf("tag: %w", errNoField)
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	switch {
	case len(tag) == 1 && tag[0] == tagFull:
	case len(tag) == 1 && tag[0] == tagPartial:
		rec.partial = true
	default:
		return rec, fmt.Errorf("tag %q: want F or P", tag)
	}
	rec.content = content
	return rec, nil
}
