package proxy

import (
	"net"
	"net/netip"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// Small builders of nftables expressions, in nft's words.
//
// Registers: 1 is the first 16-byte register; a concatenation's parts go
// into the 4-byte registers 8 (the first quarter of register 1), 9, 10...,
// each part in as many as it needs, as nft puts them.

const (
	reg32a = 9  // the second 4-byte register of register 1
	reg32b = 10 // the third
)

// icmpPortUnreach is ICMP_PORT_UNREACH, the code of a plain reject.
const icmpPortUnreach = 3

// loadDaddr: ip daddr → reg.
func loadDaddr(reg uint32) expr.Any {
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
}

// loadSaddr: ip saddr → reg.
func loadSaddr(reg uint32) expr.Any {
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
}

// loadL4proto: meta l4proto → reg.
func loadL4proto(reg uint32) expr.Any { return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg} }

// loadDport: th dport → reg.
func loadDport(reg uint32) expr.Any {
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
}

// destKey: ip daddr . meta l4proto . th dport → register 1.
func destKeyExprs() []expr.Any {
	return []expr.Any{loadDaddr(1), loadL4proto(reg32a), loadDport(reg32b)}
}

// nodePortKey: meta l4proto . th dport → register 1.
func nodePortKeyExprs() []expr.Any { return []expr.Any{loadL4proto(1), loadDport(reg32a)} }

// srcKey: ip saddr . meta l4proto . th sport → register 1.
func srcKeyExprs() []expr.Any {
	return []expr.Any{loadSaddr(1), loadL4proto(reg32a),
		&expr.Payload{DestRegister: reg32b, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2}}
}

// protoNum is the IP protocol number of proto (TCP or UDP).
func protoNum(proto corev1.Protocol) byte {
	if proto == corev1.ProtocolUDP {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// destKeyBytes is a key of destKeyExprs: each part padded to 4 bytes.
func destKeyBytes(a netip.Addr, proto corev1.Protocol, port uint16) []byte {
	a4 := a.As4()
	return []byte{a4[0], a4[1], a4[2], a4[3], protoNum(proto), 0, 0, 0, byte(port >> 8), byte(port), 0, 0}
}

// nodePortKeyBytes is a key of nodePortKeyExprs.
func nodePortKeyBytes(proto corev1.Protocol, port uint16) []byte {
	return []byte{protoNum(proto), 0, 0, 0, byte(port >> 8), byte(port), 0, 0}
}

// lookup: reg @set (a set: match if in it).
func lookup(set string, reg uint32) expr.Any { return &expr.Lookup{SourceRegister: reg, SetName: set} }

// vmap: reg vmap @set.
func vmap(set string, reg uint32) expr.Any {
	return &expr.Lookup{SourceRegister: reg, SetName: set, DestRegister: 0, IsDestRegSet: true}
}

// verdict: accept, drop, return (in a rule, or as a map's data).
func verdict(k expr.VerdictKind) *expr.Verdict { return &expr.Verdict{Kind: k} }

// jump: jump chain.
func jump(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }

// goTo: goto chain.
func goTo(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain} }

// saddrIs: ip saddr a.
func saddrIs(a netip.Addr) []expr.Any {
	return []expr.Any{loadSaddr(1), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()}}
}

// inPrefix: ip saddr (offset 12) or daddr (16) in p (in) or not.
func inPrefix(offset uint32, p netip.Prefix, in bool) []expr.Any {
	op := expr.CmpOpEq
	if !in {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: net.CIDRMask(p.Bits(), 32), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: p.Addr().AsSlice()},
	}
}

// Offsets of the addresses in the IPv4 header, for inPrefix.
const (
	offSaddr = 12
	offDaddr = 16
)

// loopback is 127.0.0.0/8: node ports are not served there.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// fibLocal: fib daddr (or saddr) type local.
func fibLocal(daddr bool) []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: daddr, FlagSADDR: !daddr, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

// bitsSet: reg & bits != 0 (or == 0 with !set), on a host-order word.
func bitsSet(bits uint32, set bool) []expr.Any {
	op := expr.CmpOpNeq
	if !set {
		op = expr.CmpOpEq
	}
	return []expr.Any{
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: make([]byte, 4)},
	}
}

// ctStateNew: ct state new.
func ctStateNew() []expr.Any {
	return append([]expr.Any{&expr.Ct{Register: 1, Key: expr.CtKeySTATE}}, bitsSet(expr.CtStateBitNEW, true)...)
}

// ipsDstNAT is IPS_DST_NAT of the conntrack status
// (linux/netfilter/nf_conntrack_common.h).
const ipsDstNAT = 1 << 5

// Directions of conntrack (enum ip_conntrack_dir).
const (
	ctDirOriginal = 0
	ctDirReply    = 1
)

// ctDirection: ct direction original (or reply).
func ctDirection(dir byte) []expr.Any {
	return []expr.Any{&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{dir}}}
}

// ctNotDNAT: ct status & dnat == 0.
func ctNotDNAT() []expr.Any {
	return append([]expr.Any{&expr.Ct{Register: 1, Key: expr.CtKeySTATUS}}, bitsSet(ipsDstNAT, false)...)
}

// markNotSet: meta mark & MasqueradeMark == 0.
func markNotSet() []expr.Any {
	return append([]expr.Any{&expr.Meta{Key: expr.MetaKeyMARK, Register: 1}}, bitsSet(MasqueradeMark, false)...)
}

// setMark: meta mark set meta mark | MasqueradeMark (or, with toggle,
// meta mark ^ MasqueradeMark).
func setMark(toggle bool) []expr.Any {
	mask, xor := ^uint32(MasqueradeMark), uint32(MasqueradeMark)
	if toggle {
		mask = ^uint32(0)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(xor)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// dnatTo: meta l4proto P dnat to ap.
func dnatTo(proto corev1.Protocol, ap netip.AddrPort) []expr.Any {
	return []expr.Any{
		loadL4proto(1),
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNum(proto)}},
		&expr.Immediate{Register: 1, Data: ap.Addr().AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(ap.Port())},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// counterRef: counter name "name".
func counterRef(name string) expr.Any {
	return &expr.Objref{Type: unix.NFT_OBJECT_COUNTER, Name: name}
}

// updateSaddr: update @set { ip saddr }.
func updateSaddr(set string) []expr.Any {
	return []expr.Any{loadSaddr(1), &expr.Dynset{SrcRegKey: 1, SetName: set, Operation: unix.NFT_DYNSET_OP_UPDATE}}
}

// rejectPort: reject (with ICMP port unreachable, as nft's plain reject
// does for IPv4), so that a TCP connect fails with ECONNREFUSED at once.
func rejectPort() expr.Any {
	return &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: icmpPortUnreach}
}
