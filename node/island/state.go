package island

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/raft/atomicfile"
)

// Role of a board.
const (
	RoleServer = "server"
	RoleAgent  = "agent"
)

// State is what an island is made of: written to DIR/island.json before
// each part is made, read by `isle down` and `isle board`.
type State struct {
	Dir string       `json:"dir"`
	LAN netip.Prefix `json:"lan"`
	// Host is the host's address on the LAN (the registry's).
	Host netip.Addr `json:"host"`
	// VIP is the servers' floating API address.
	VIP      netip.Addr `json:"vip"`
	Registry Proc       `json:"registry"`
	Boards   []Board    `json:"boards"`
	// BoardFlags are more flags every board's isle gets.
	BoardFlags []string `json:"boardFlags,omitempty"`
	// Mirrors are more registry hosts the boards pull from the island's
	// registry.
	Mirrors []string `json:"mirrors,omitempty"`
}

// Board is one simulated board.
type Board struct {
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Addr       netip.Addr `json:"addr"`
	Isle       Proc       `json:"isle"`
	Containerd Proc       `json:"containerd"`
	// Down: stopped or killed with `isle board` (or not started yet).
	Down bool `json:"down,omitempty"`
	// Partitioned: its LAN link is cut.
	Partitioned bool `json:"partitioned,omitempty"`
}

// Proc identifies a process: its PID and its start time (clock ticks
// after boot), so a reused PID is never taken for it.
type Proc struct {
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
}

const stateFile = "island.json"

// Board returns the board called name.
func (s *State) Board(name string) (*Board, error) {
	for i := range s.Boards {
		if s.Boards[i].Name == name {
			return &s.Boards[i], nil
		}
	}
	var names []string
	for _, b := range s.Boards {
		names = append(names, b.Name)
	}
	return nil, fmt.Errorf("island: no board %q (boards: %v)", name, names)
}

func (s *State) boardDir(name string) string { return filepath.Join(s.Dir, name) }

// save writes the state atomically (temporary file, fsync, rename, fsync
// of the directory): a crash leaves the old state or the new one.
func (s *State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("island: state: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(s.Dir, stateFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("island: state: %w", err)
	}
	return nil
}

// ErrNoIsland is returned when a directory holds no island.
var ErrNoIsland = errors.New("no island")

// Load reads the state of the island in dir.
func Load(dir string) (*State, error) {
	path := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("island: %w in %s (no %s)", ErrNoIsland, dir, stateFile)
	}
	if err != nil {
		return nil, fmt.Errorf("island: %w", err)
	}
	s := &State{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("island: %s is damaged: %v; remove the island by hand (see `isle down --help`)", path, err)
	}
	if err := s.check(dir); err != nil {
		return nil, fmt.Errorf("island: %s: %w", path, err)
	}
	return s, nil
}

// check refuses a state that names things the island would not make: its
// names go into paths and link names, and its PIDs get signals.
func (s *State) check(dir string) error {
	if s.Dir != dir || dir == "/" {
		return fmt.Errorf("made for directory %s, found in %s", s.Dir, dir)
	}
	if !s.LAN.IsValid() || !s.LAN.Contains(s.Host) {
		return fmt.Errorf("LAN %v and host address %v do not fit", s.LAN, s.Host)
	}
	seen := map[string]bool{}
	for _, b := range s.Boards {
		if !validName(b.Name) || seen[b.Name] {
			return fmt.Errorf("board name %q is invalid or repeated", b.Name)
		}
		seen[b.Name] = true
		if b.Role != RoleServer && b.Role != RoleAgent {
			return fmt.Errorf("board %s: role %q", b.Name, b.Role)
		}
		if !s.LAN.Contains(b.Addr) {
			return fmt.Errorf("board %s: address %v is outside the LAN %v", b.Name, b.Addr, s.LAN)
		}
	}
	return nil
}

// validName: board names become namespace and link names (isle-NAME
// within 15 bytes).
func validName(name string) bool {
	if name == "" || len(name) > 10 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// lock takes the island directory's lock: one isle up, down or board at a
// time. The lock ends with the process.
func lock(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "island.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("island: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("island: another isle up, down or board command is working on %s", dir)
	}
	return func() { f.Close() }, nil
}
