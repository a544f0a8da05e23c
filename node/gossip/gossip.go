// Package gossip is a board's membership in its cluster: a memberlist
// (SWIM) member on port 7946, TCP and UDP, encrypted with AES-GCM under a
// key derived from the cluster token. Every board, server or agent, runs
// one. Gossip carries what boards need to know of each other (name, role,
// addresses, architecture, version) and who is alive, without writing
// anything to disk: liveness costs no store writes.
package gossip

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultPort is the gossip port, TCP and UDP.
const DefaultPort = 7946

// anyPort asks for a port the kernel chooses (Discover's short-lived member).
const anyPort = -1

// Role is what a board does in the cluster.
type Role string

const (
	RoleServer Role = "server" // store member and API server (and a node)
	RoleAgent  Role = "agent"  // a node only
	// roleJoining marks the short-lived member a new board uses to learn
	// where the servers are before it has a name in the cluster.
	roleJoining Role = "joining"
)

// Meta is what a board tells the others about itself. It travels in every
// alive message, so it is kept well under memberlist's 512-byte limit.
type Meta struct {
	Name    string `json:"name"`
	Role    Role   `json:"role"`
	RaftID  uint64 `json:"raftID,omitempty,string"`
	API     string `json:"api,omitempty"`  // host:port of its API server
	Raft    string `json:"raft,omitempty"` // host:port of its raft transport
	Arch    string `json:"arch"`           // GOARCH, with the ARM version: arm64, arm/v7, arm/v6
	Version string `json:"version"`
	PodCIDR string `json:"podCIDR,omitempty"`
	// Leaving is announced just before a graceful leave: memberlist tells
	// a left member from a dead one only inside, not to its delegates.
	Leaving bool `json:"leaving,omitempty"`
}

// State is a member's liveness as the SWIM protocol sees it.
type State string

const (
	Alive   State = "alive"
	Suspect State = "suspect" // missed probes; others may still refute it
	Dead    State = "dead"    // declared failed
	Left    State = "left"    // said goodbye
)

// Member is one board as this board's gossip sees it.
type Member struct {
	Meta
	Addr  netip.AddrPort
	State State
	// Since is when this board saw the member enter its state.
	Since time.Time
}

// Config configures a member.
type Config struct {
	// Meta describes this board; Meta.Name is its member name.
	Meta Meta
	// Addr is the IP to bind and advertise (the board's own address).
	Addr netip.Addr
	// Port defaults to DefaultPort.
	Port int
	// Key is the AES-256 key (DeriveKey of the token's secret).
	Key []byte
	// Tuning defaults to LANTuning.
	Tuning *Tuning
	// Uncompressed sends messages as they are; false: compressed with
	// memberlist's LZW, which allocates a 64 KiB table for every packet
	// sent. Hundreds of hollow boards in one process (make bench-scale)
	// spent a quarter of its CPU on it; a board's few hundred bytes a second
	// are worth compressing.
	Uncompressed bool
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
}

// Tuning is the SWIM timing. LANTuning documents the choices.
type Tuning struct {
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// SuspicionMult × log10(boards) × ProbeInterval is how long a suspect
	// has to refute before it is declared dead.
	SuspicionMult  int
	GossipInterval time.Duration
	PushPull       time.Duration
}

// LANTuning is for boards on one LAN. A board is probed once a second
// (500 ms for the direct answer, then three others try, then TCP), and a
// suspect is dead after 3 × log10(n) probe intervals: 3 s for up to ten
// boards. memberlist's default lets confirmations stretch that to 6×;
// isle does not (SuspicionMaxTimeoutMult 1), so a pulled board is dead
// within about 4-5 s instead of 30. Gossip goes to 3 boards every 200 ms;
// the full state is exchanged every 30 s. With ten boards that is a few
// hundred bytes per second per board.
var LANTuning = Tuning{
	ProbeInterval:  time.Second,
	ProbeTimeout:   500 * time.Millisecond,
	SuspicionMult:  3,
	GossipInterval: 200 * time.Millisecond,
	PushPull:       30 * time.Second,
}

// DeriveKey derives the gossip key from the cluster token's secret. A board
// without the token cannot read or write gossip; the CA hash is left out so
// a token with a wrong CA hash still reaches the API, whose certificate
// check then says precisely what is wrong.
func DeriveKey(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("gossip: empty token secret")
	}
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, "isle gossip key v1", 32)
	if err != nil {
		return nil, fmt.Errorf("gossip: derive key: %w", err)
	}
	return k, nil
}

// Gossip is this board's member.
type Gossip struct {
	ml      *memberlist.Memberlist
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	meta    Meta
	members map[string]Member // every member seen, dead and left ones too
	changed chan struct{}     // closed and replaced on every change
}

// Start starts the member; it listens at once but knows nobody until Join.
func Start(cfg Config) (*Gossip, error) {
	if err := cfg.Meta.validate(); err != nil {
		return nil, err
	}
	if !cfg.Addr.IsValid() || cfg.Addr.IsUnspecified() {
		return nil, fmt.Errorf("gossip: address %v: want the board's own IP", cfg.Addr)
	}
	if len(cfg.Key) != 32 {
		return nil, fmt.Errorf("gossip: key of %d bytes: want 32 (AES-256)", len(cfg.Key))
	}
	switch cfg.Port {
	case 0:
		cfg.Port = DefaultPort
	case anyPort:
		cfg.Port = 0
	}
	t := LANTuning
	if cfg.Tuning != nil {
		t = *cfg.Tuning
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &Gossip{log: cfg.Logger, meta: cfg.Meta, members: map[string]Member{}, changed: make(chan struct{})}
	g.metrics = newMetrics(cfg.Registerer, g)

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Meta.Name
	mc.BindAddr = cfg.Addr.String()
	mc.BindPort = cfg.Port
	mc.AdvertiseAddr = cfg.Addr.String()
	mc.AdvertisePort = cfg.Port
	mc.SecretKey = cfg.Key
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	mc.EnableCompression = !cfg.Uncompressed
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = t.SuspicionMult, 1
	mc.GossipInterval, mc.PushPullInterval = t.GossipInterval, t.PushPull
	mc.TCPTimeout = 5 * time.Second
	// A board that died may come back with another address (DHCP); its
	// name is its own once the others have declared it dead for a while.
	mc.DeadNodeReclaimTime = 30 * time.Second
	mc.Delegate = (*delegate)(g)
	mc.Events = (*events)(g)
	mc.Conflict = (*conflicts)(g)
	mc.Logger = newMemberlistLogger(cfg.Logger, g.metrics)
	mc.LogOutput = nil
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: start on %s: %w", net.JoinHostPort(mc.BindAddr, strconv.Itoa(cfg.Port)), err)
	}
	g.ml = ml
	return g, nil
}

// Join contacts boards at addrs (host or host:port; port 7946 when
// missing) and returns how many answered. One is enough: the rest of the
// cluster arrives in its state.
func (g *Gossip) Join(addrs []string) (int, error) {
	n, err := g.ml.Join(withPort(addrs))
	if n > 0 {
		return n, nil
	}
	why := "nobody answered"
	if err != nil {
		// memberlist's multierror spans lines; one line per cause reads better in logs.
		why = strings.Join(strings.Fields(strings.NewReplacer("1 error occurred:", "", "* ", "").Replace(err.Error())), " ")
	}
	return 0, fmt.Errorf("gossip: join %v: %s (is the address right, and is the token this cluster's? gossip under another token cannot be read)", addrs, why)
}

func withPort(addrs []string) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(a, strconv.Itoa(DefaultPort))
		}
		out = append(out, a)
	}
	return out
}

// Self is this board's own metadata.
func (g *Gossip) Self() Meta {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.meta
}

// UpdateMeta changes this board's metadata and tells the others.
func (g *Gossip) UpdateMeta(f func(*Meta)) error {
	g.mu.Lock()
	m := g.meta
	f(&m)
	if m.Name != g.meta.Name {
		g.mu.Unlock()
		return errors.New("gossip: a member cannot change its name")
	}
	if err := m.validate(); err != nil {
		g.mu.Unlock()
		return err
	}
	g.meta = m
	g.mu.Unlock()
	if err := g.ml.UpdateNode(5 * time.Second); err != nil {
		return fmt.Errorf("gossip: announce new metadata: %w", err)
	}
	return nil
}

// Push exchanges the full state with every other alive member over TCP,
// as the periodic exchange does with one member every PushPull: a change
// of this board's metadata, whose broadcast travels over UDP and can be
// lost, reaches them all now rather than up to PushPull later. It returns
// how many answered.
func (g *Gossip) Push() int {
	self := g.Self().Name
	var addrs []string
	for _, m := range g.Members() {
		if m.Name != self && m.State == Alive {
			addrs = append(addrs, m.Addr.String())
		}
	}
	if len(addrs) == 0 {
		return 0
	}
	n, _ := g.ml.Join(addrs) // a known member's join is a state exchange
	return n
}

// Members returns every board seen, sorted by name, including ones that
// are dead or left (with that state). This board is included.
func (g *Gossip) Members() []Member {
	return g.collect(func(Member) bool { return true })
}

// Servers returns the alive servers' members, sorted by name.
func (g *Gossip) Servers() []Member {
	return g.collect(func(m Member) bool { return m.Role == RoleServer && m.State != Dead && m.State != Left })
}

// collect returns the members that keep takes, sorted by name. Every
// agent asks for the servers at every change of any member: sorting all
// the members each time took an eighth of the CPU of 250 hollow boards
// (make bench-scale, pprof), where three servers are to be sorted.
func (g *Gossip) collect(keep func(Member) bool) []Member {
	// Suspicion is not an event of memberlist; read it from its list.
	suspects := map[string]bool{}
	for _, n := range g.ml.Members() {
		if n.State == memberlist.StateSuspect {
			suspects[n.Name] = true
		}
	}
	g.mu.Lock()
	var out []Member
	for name, m := range g.members {
		if m.State == Alive && suspects[name] {
			m.State = Suspect
		}
		if keep(m) {
			out = append(out, m)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Changed returns a channel closed at the next change of any member's
// state or metadata. Suspicion does not close it (poll Members for that).
func (g *Gossip) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// Forget drops a left or dead member from what Members reports (after
// `isle member remove`). memberlist itself forgets it after a while.
func (g *Gossip) Forget(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[name]; ok && (m.State == Dead || m.State == Left) {
		delete(g.members, name)
		g.notifyLocked()
	}
}

// Leave tells the others this board is going (they mark it left at once,
// instead of suspecting it), then stops.
func (g *Gossip) Leave(timeout time.Duration) error {
	err := g.UpdateMeta(func(m *Meta) { m.Leaving = true })
	if err == nil {
		err = g.ml.Leave(timeout)
	}
	if serr := g.ml.Shutdown(); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// Stop stops without saying goodbye (the others will find out).
func (g *Gossip) Stop() error {
	return g.ml.Shutdown()
}

func (g *Gossip) set(n *memberlist.Node, st State) {
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.Name != n.Name {
		g.log.Warn("gossip: member with unreadable metadata ignored", "member", n.Name, "addr", n.Address())
		return
	}
	if meta.Role == roleJoining {
		return // a board still joining; it has no name in the cluster yet
	}
	addr, _ := netip.AddrFromSlice(n.Addr)
	m := Member{Meta: meta, Addr: netip.AddrPortFrom(addr.Unmap(), n.Port), State: st, Since: time.Now()}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.members[n.Name]; ok && old.State == st {
		m.Since = old.Since
	}
	if old, ok := g.members[n.Name]; !ok || old.State != st {
		g.log.Info("gossip: member "+string(st), "member", n.Name, "role", meta.Role, "addr", m.Addr.String())
	}
	g.members[n.Name] = m
	g.notifyLocked()
}

func (g *Gossip) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (m Meta) validate() error {
	switch {
	case m.Name == "":
		return errors.New("gossip: a member needs a name")
	case m.Role != RoleServer && m.Role != RoleAgent && m.Role != roleJoining:
		return fmt.Errorf("gossip: role %q: want server or agent", m.Role)
	}
	b, _ := json.Marshal(m)
	if len(b) > memberlist.MetaMaxSize {
		return fmt.Errorf("gossip: metadata of %d bytes exceeds memberlist's %d", len(b), memberlist.MetaMaxSize)
	}
	return nil
}

// delegate gives memberlist this board's metadata; isle sends no user
// messages or state of its own.
type delegate Gossip

func (d *delegate) NodeMeta(limit int) []byte {
	g := (*Gossip)(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	b, _ := json.Marshal(g.meta)
	if len(b) > limit {
		g.log.Error("gossip: metadata too large; sending none", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}
func (d *delegate) NotifyMsg([]byte)                    {}
func (d *delegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (d *delegate) LocalState(bool) []byte              { return nil }
func (d *delegate) MergeRemoteState(buf []byte, _ bool) {}

type events Gossip

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Gossip)(e).set(n, Alive) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Gossip)(e).set(n, Alive) }
func (e *events) NotifyLeave(n *memberlist.Node) {
	g := (*Gossip)(e)
	g.mu.Lock()
	st := Dead
	if g.members[n.Name].Leaving {
		st = Left
	}
	g.mu.Unlock()
	g.set(n, st)
}

type conflicts Gossip

// NotifyConflict is a second board using a name that an alive board has.
func (c *conflicts) NotifyConflict(existing, other *memberlist.Node) {
	g := (*Gossip)(c)
	g.metrics.conflicts.Inc()
	g.log.Error("gossip: another board claims an existing member's name; ignored",
		"name", existing.Name, "existing", existing.Address(), "claimant", other.Address())
}
