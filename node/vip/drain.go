package vip

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// drainTable is the nftables table of Drain's rule.
const drainTable = "isle-vip-drain"

// Drain makes the board drop new TCP connections to the floating address
// (the first packet of each: the client sends it again a second later, by
// then to the board that holds the address), for a leader about to hand
// it on: the requests it has accepted finish before the address moves,
// instead of losing their answer with it. undo removes the rule; Release
// removes one left by a board that crashed while draining.
func Drain(c Config) (undo func() error, err error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	conn := &nftables.Conn{}
	t := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: drainTable})
	ch := conn.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	vip := c.VIP.As4()
	conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		// IPv4, to the floating address, TCP
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vip[:]},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		// SYN without ACK: a new connection
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := conn.Flush(); err != nil {
		return nil, fmt.Errorf("vip: drain %v: %w", c.VIP, err)
	}
	return removeDrain, nil
}

// Undrain removes a rule Drain added, if there is one.
func Undrain() error { return removeDrain() }

// removeDrain removes Drain's table, if there is one.
func removeDrain() error {
	conn := &nftables.Conn{}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("vip: list nftables tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == drainTable {
			conn.DelTable(t)
			if err := conn.Flush(); err != nil {
				return fmt.Errorf("vip: remove the drain: %w", err)
			}
		}
	}
	return nil
}
