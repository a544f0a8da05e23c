package island

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"
)

// Actions on one board (`isle board ACTION NAME`).
const (
	ActionStop      = "stop"      // shut down: isle and containerd stop, then the power goes
	ActionStart     = "start"     // power on: a fresh network stack and /run, containerd, isle
	ActionKill      = "kill"      // pull the power: kill -9 of everything of the board
	ActionPartition = "partition" // pull its LAN cable
	ActionHeal      = "heal"      // plug it back
	// ActionRestart: isle alone crashes (kill -9) and starts again;
	// containerd and the containers keep running.
	ActionRestart = "restart"
	// ActionUpgrade: isle alone stops (SIGTERM) and starts again from the
	// binary that runs `isle board upgrade`, as a package upgrade does;
	// containerd and the containers keep running.
	ActionUpgrade = "upgrade"
)

// Act performs action on the board called name of the island in dir.
// bin is the isle binary a started board runs ("": this process's own).
func Act(dir, action, name, bin string, out io.Writer) error {
	var err error
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("island: the isle binary: %w", err)
		}
	}
	s, release, err := openIsland(dir)
	if err != nil {
		return err
	}
	defer release()
	b, err := s.Board(name)
	if err != nil {
		return err
	}
	switch action {
	case ActionKill:
		err = powerOff(s, b)
		if uerr := unplugBoard(b.Name); err == nil {
			err = uerr
		}
	case ActionStop:
		grace := b.Isle.stop(20 * time.Second)
		grace = b.Containerd.stop(10*time.Second) && grace
		err = powerOff(s, b)
		if uerr := unplugBoard(b.Name); err == nil {
			err = uerr
		}
		if !grace {
			fmt.Fprintf(out, "%s did not stop within its grace period: killed\n", b.Name)
		}
	case ActionStart:
		if !b.Down {
			return fmt.Errorf("island: board %s runs already (stop or kill it first)", b.Name)
		}
		if err = boot(s, b, bin); err == nil {
			err = waitServing(s, b)
		}
	case ActionRestart, ActionUpgrade:
		if b.Down {
			return fmt.Errorf("island: board %s is down (start it)", b.Name)
		}
		if action == ActionUpgrade && !b.Isle.stop(20*time.Second) {
			fmt.Fprintf(out, "%s's isle did not stop within its grace period: killed\n", b.Name)
		}
		b.Isle.signal(syscall.SIGKILL)
		for b.Isle.Alive() {
			time.Sleep(20 * time.Millisecond)
		}
		if err = startIsle(s, b, bin); err == nil {
			err = waitServing(s, b)
		}
	case ActionPartition, ActionHeal:
		if b.Down {
			return fmt.Errorf("island: board %s is down", b.Name)
		}
		b.Partitioned = action == ActionPartition
		err = setPort(b.Name, !b.Partitioned)
	default:
		return fmt.Errorf("island: unknown action %q: want stop, start, kill, restart, upgrade, partition or heal", action)
	}
	if serr := s.save(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %s\n", b.Name, map[string]string{
		ActionKill: "killed (everything of it, with kill -9) and off the LAN", ActionStop: "stopped and off the LAN",
		ActionStart: "started", ActionRestart: "isle restarted", ActionUpgrade: "isle stopped and started from " + bin, ActionPartition: "cut off the LAN", ActionHeal: "back on the LAN",
	}[action])
	return nil
}

// boot powers a board on, as after a power cut: a fresh namespace and
// /run, then its containerd and isle with the command line it always has.
func boot(s *State, b *Board, bin string) error {
	if err := powerOff(s, b); err != nil { // what a crash of isle up may have left
		return err
	}
	if err := unplugBoard(b.Name); err != nil {
		return err
	}
	b.Partitioned = false
	if err := plugBoard(s, b); err != nil {
		return err
	}
	if err := startContainerd(s, b); err != nil {
		return err
	}
	return startIsle(s, b, bin)
}

// List prints the island's boards and their state.
func List(dir string, out io.Writer) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("island: %w", err)
	}
	s, err := Load(dir)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BOARD\tROLE\tADDRESS\tSTATE\tISLE\tCONTAINERD")
	for _, b := range s.Boards {
		state := "up"
		switch {
		case b.Down:
			state = "down"
		case b.Partitioned:
			state = "partitioned"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", b.Name, b.Role, b.Addr, state, procState(b.Isle), procState(b.Containerd))
	}
	return tw.Flush()
}

func procState(p Proc) string {
	if p.Alive() {
		return fmt.Sprintf("pid %d", p.PID)
	}
	return "-"
}

// waitServing waits until the board's isle serves its streaming port (it
// has its containerd and its serving certificate), or says why not: it
// exited (with its log's tail), or it is late.
func waitServing(s *State, b *Board) error {
	addr := net.JoinHostPort(b.Addr.String(), "10250")
	return waitFor(60*time.Second, b.Name+"'s isle serving on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, b.Isle, s.logPath(b, "isle"))
}
