package island

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/isle-cluster/isle/hw/led"
)

// BoardLEDs is a board of the island and what its virtual LEDs show.
type BoardLEDs struct {
	Name, Role string
	// Running: the board's isle runs. A board whose isle does not has its
	// LEDs dark, whatever its state file last said.
	Running bool
	LEDs    led.State
}

// LEDs reads the virtual LEDs of the island's boards in dir, from the state
// file each board's isle keeps in its run directory.
func LEDs(dir string) ([]BoardLEDs, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("island: %w", err)
	}
	s, err := Load(dir)
	if err != nil {
		return nil, err
	}
	out := make([]BoardLEDs, 0, len(s.Boards))
	for i := range s.Boards {
		b := &s.Boards[i]
		bl := BoardLEDs{Name: b.Name, Role: b.Role, Running: b.Isle.Alive()}
		if bl.Running {
			st, err := led.ReadStateFile(filepath.Join(s.runDir(b), led.StateFileName))
			switch {
			case errors.Is(err, fs.ErrNotExist): // not written yet: dark
			case err != nil:
				return nil, fmt.Errorf("island: board %s: %w", b.Name, err)
			default:
				bl.LEDs = st
			}
		}
		out = append(out, bl)
	}
	return out, nil
}

// StatusOptions say how Status shows the boards.
type StatusOptions struct {
	// Live redraws the table every Interval until the context ends; else
	// Status prints it once.
	Live     bool
	Interval time.Duration
	// Color paints lit LEDs (a terminal that takes ANSI colours).
	Color bool
	// Now is the clock the readiness LEDs are animated by (nil: the
	// system's).
	Now func() time.Time
}

// Status prints every board of the island in dir with its two LEDs, as
// dots: the readiness LED green and the activity LED amber when lit.
func Status(ctx context.Context, dir string, out io.Writer, o StatusOptions) error {
	var last map[string]uint64 // flashes per board at the last frame
	lines := 0
	now := o.Now
	if now == nil {
		now = time.Now
	}
	for {
		boards, err := LEDs(dir)
		if err != nil {
			return err
		}
		var frame strings.Builder
		if lines > 0 {
			fmt.Fprintf(&frame, "\x1b[%dA", lines) // back to the table's top
		}
		flashes := make(map[string]uint64, len(boards))
		frame.WriteString(statusLine(o.Live, "BOARD", "ROLE", "READY", "ACT", "PATTERN", "MEANING"))
		for _, b := range boards {
			flashes[b.Name] = b.LEDs.Flashes
			// The state file holds the patterns, not their edges: the
			// readiness LED is animated here, and a flash shows for one
			// frame after the counter moved.
			act := last != nil && b.LEDs.Flashes > last[b.Name]
			frame.WriteString(statusLine(o.Live, b.Name, b.Role,
				dot(o.Color, b.LEDs.ReadyLitAt(now()), "32"), dot(o.Color, act, "33"), b.LEDs.Pattern(), meaning(b)))
		}
		if _, err := io.WriteString(out, frame.String()); err != nil {
			return fmt.Errorf("island: status: %w", err)
		}
		if !o.Live {
			return nil
		}
		last, lines = flashes, len(boards)+1
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Interval):
		}
	}
}

// statusWidths are the widths of the status table's columns but the last.
var statusWidths = []int{8, 8, 7, 5, 14}

// statusLine is a line of the status table; erase clears what a longer
// line of the last frame left.
func statusLine(erase bool, cols ...string) string {
	var b strings.Builder
	for i, c := range cols {
		if w := statusWidths; i < len(w) {
			// Escape sequences take no room on screen.
			pad := w[i] - len([]rune(stripANSI(c)))
			b.WriteString(c + strings.Repeat(" ", max(pad, 1)))
			continue
		}
		b.WriteString(c)
	}
	if erase {
		b.WriteString("\x1b[K")
	}
	return b.String() + "\n"
}

func stripANSI(s string) string {
	for {
		i := strings.Index(s, "\x1b[")
		if i < 0 {
			return s
		}
		j := strings.IndexByte(s[i:], 'm')
		if j < 0 {
			return s
		}
		s = s[:i] + s[i+j+1:]
	}
}

// dot is an LED: a filled dot when lit (in colour sgr), a ring when dark.
func dot(color, lit bool, sgr string) string {
	switch {
	case !lit:
		return "○"
	case color:
		return "\x1b[1;" + sgr + "m●\x1b[0m"
	}
	return "●"
}

// meaning says in words what the readiness LED tells.
func meaning(b BoardLEDs) string {
	if !b.Running {
		return "isle is not running"
	}
	switch b.LEDs.Pattern() {
	case "slow-blink":
		return "starting or joining"
	case "fast-blink":
		return "joined, NotReady"
	case "solid-dip":
		return "Ready, cut off from the control plane"
	case "solid":
		return "Ready"
	case "solid-leader":
		return "Ready, the store's leader"
	}
	return "isle starting or stopping"
}
