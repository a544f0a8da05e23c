package gossip

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"
)

// ErrWrongKey is a board that answered gossip under another key: the
// token is not its cluster's.
var ErrWrongKey = errors.New("the board there speaks gossip under another token's key")

// DiscoverRetry is Discover, tried again every second while no board
// answers at seeds (boards powered on together come up in any order),
// until ctx ends. A board that answers under another key ends it at once.
func DiscoverRetry(ctx context.Context, addr netip.Addr, key []byte, seeds []string, log *slog.Logger) ([]Member, error) {
	for attempt := 0; ; attempt++ {
		found, err := Discover(addr, key, seeds)
		if err == nil || errors.Is(err, ErrWrongKey) {
			return found, err
		}
		if attempt%10 == 0 {
			log.Warn("gossip: no board of the cluster answered yet; retrying", "seeds", seeds, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gossip: discover through %v: %w (last error: %v)", seeds, ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// Discover learns the cluster's members through any board at seeds,
// before this board has a name in the cluster: it joins for a moment as an
// anonymous member on a spare port (the others do not list it), reads the
// state it was sent, and leaves. A seed that does not answer under key,
// the key of another token, fails here.
//
// What the short-lived member logs is dropped: its failures come back as
// Join's error.
func Discover(addr netip.Addr, key []byte, seeds []string) ([]Member, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	g, err := Start(Config{Meta: Meta{Name: "joining-" + hex.EncodeToString(b[:]), Role: roleJoining},
		Addr: addr, Port: anyPort, Key: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("gossip: discover: %w", err)
	}
	defer func() { _ = g.Leave(time.Second) }()
	if _, err := g.Join(seeds); err != nil {
		if strings.Contains(err.Error(), "decrypt") || strings.Contains(err.Error(), "not encrypted") {
			return nil, fmt.Errorf("gossip: discover through %v: %w: is the token this cluster's?", seeds, ErrWrongKey)
		}
		return nil, err
	}
	// The push-pull exchange of Join delivers the seed's whole view; a
	// short wait lets members it learned from others settle too.
	time.Sleep(2 * LANTuning.GossipInterval)
	var out []Member
	servers := 0
	for _, m := range g.Members() {
		if m.State == Alive || m.State == Suspect {
			out = append(out, m)
			if m.Role == RoleServer {
				servers++
			}
		}
	}
	if servers == 0 {
		// The seed itself may not have heard of the servers yet (a board
		// that has just joined): DiscoverRetry asks again.
		return nil, fmt.Errorf("gossip: discover through %v: no server listed yet (%d boards seen)", seeds, len(out))
	}
	return out, nil
}
