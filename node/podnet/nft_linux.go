package podnet

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// TableName is the nftables table of the Pod network (family ip).
const TableName = "isle-podnet"

// The table, in nft's words (P the pod CIDR, C the cluster CIDR):
//
//	table ip isle-podnet {
//	  chain postrouting { type nat hook postrouting priority srcnat
//	    ip saddr P ip daddr != C masquerade                # pods to the world
//	    ip saddr P ip daddr P meta mark & 0x8000 != 0 masquerade   # pod to a hostPort of its own board
//	  }
//	  chain prerouting { type nat hook prerouting priority dstnat
//	    fib daddr type local jump hostports
//	  }
//	  chain output { type nat hook output priority dstnat
//	    ip saddr != 127.0.0.0/8 fib daddr type local jump hostports
//	  }
//	  chain hostports {
//	    [ip daddr HOSTIP] meta l4proto tcp th dport 8080 meta mark set mark | 0x8000 dnat to POD:80
//	    ...
//	  }
//	}
//
// Packets from loopback addresses are left out: a packet from 127.0.0.1
// cannot leave the board for a pod. One from the board's own address to
// 127.0.0.1 can (curl --interface ADDR http://127.0.0.1:PORT), as a
// hostPort with hostIP 127.0.0.1 is reached. The mark bit 0x8000 (HostPortMark) is the table's:
// only hostPort traffic between pods of the board is masqueraded, so that
// a pod reaching its own hostPort gets the replies; a pod reaching another
// through a Service (package proxy) keeps its address.

// writeTable replaces the table with the one that follows from the pod
// CIDR and the records, in one transaction.
func (n *Network) writeTable() error {
	c, err := n.nft()
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	c.AddTable(t) // so that the delete finds it on the first run
	c.DelTable(t)
	c.AddTable(t)

	post := c.AddChain(&nftables.Chain{Table: t, Name: "postrouting", Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	p, cluster := n.podCIDR, n.cfg.ClusterCIDR
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: slices.Concat(
		inPrefix(12, p, true), inPrefix(16, cluster, false), []expr.Any{&expr.Masq{}})})
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: slices.Concat(
		inPrefix(12, p, true), inPrefix(16, p, true), marked(), []expr.Any{&expr.Masq{}})})

	hostports := c.AddChain(&nftables.Chain{Table: t, Name: "hostports"})
	jump := []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: hostports.Name},
	}
	pre := c.AddChain(&nftables.Chain{Table: t, Name: "prerouting", Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: jump})
	out := c.AddChain(&nftables.Chain{Table: t, Name: "output", Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: slices.Concat(
		inPrefix(12, netip.MustParsePrefix("127.0.0.0/8"), false), jump)})

	for _, r := range n.sortedRecords() {
		for _, hp := range r.HostPorts {
			c.AddRule(&nftables.Rule{Table: t, Chain: hostports, Exprs: dnat(hp, r.IP)})
		}
	}
	if err := c.Flush(); err != nil {
		n.tableStale = true
		return fmt.Errorf("podnet: nftables table %s: %w", TableName, err)
	}
	n.tableStale = false
	return nil
}

// nft is a connection to nftables in the board's namespace.
func (n *Network) nft() (*nftables.Conn, error) {
	return nftConn(n.board)
}

// inPrefix matches the IPv4 address at offset of the network header (12:
// source, 16: destination) being in p (in true) or not.
func inPrefix(offset uint32, p netip.Prefix, in bool) []expr.Any {
	op := expr.CmpOpEq
	if !in {
		op = expr.CmpOpNeq
	}
	mask := ipNet(p).Mask
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: p.Addr().AsSlice()},
	}
}

// HostPortMark is the packet mark bit of hostPort traffic, set with its
// DNAT.
const HostPortMark = 0x8000

// marked matches packets with HostPortMark.
func marked() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(HostPortMark), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// mark sets HostPortMark on the packet, keeping its other bits.
func mark() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^uint32(HostPortMark)), Xor: binaryutil.NativeEndian.PutUint32(HostPortMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// dnat is the rule of one hostPort of the pod at ip.
func dnat(hp hostPort, ip netip.Addr) []expr.Any {
	var e []expr.Any
	if hp.HostIP.IsValid() {
		e = append(e,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: hp.HostIP.AsSlice()})
	}
	proto := byte(unix.IPPROTO_TCP)
	if hp.Protocol == corev1.ProtocolUDP {
		proto = unix.IPPROTO_UDP
	}
	e = append(e,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(hp.HostPort)})
	e = append(e, mark()...)
	return append(e,
		&expr.Immediate{Register: 1, Data: ip.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(hp.ContainerPort)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	)
}

// sortedRecords are the records in address order, so that the same
// records make the same table.
func (n *Network) sortedRecords() []*record {
	rs := make([]*record, 0, len(n.records))
	for _, r := range n.records {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *record) int { return a.IP.Compare(b.IP) })
	return rs
}

// nftConn is a connection to nftables in the namespace ns (none: this
// process's own).
func nftConn(ns vnetns.NsHandle) (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if ns.IsOpen() {
		opts = append(opts, nftables.WithNetNSFd(int(ns)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("podnet: nftables: %w", err)
	}
	return c, nil
}
