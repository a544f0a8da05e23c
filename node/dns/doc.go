// Package dns is the cluster DNS of a board: a small server that answers
// the names of Services and Pods from a table the agent keeps up to date,
// and forwards every other name to the board's own resolvers.
//
// Every board runs one Server on its bridge address (10.42.N.1:53, UDP and
// TCP); the proxy sends the cluster DNS Service IP (10.43.0.10) to it, and
// PodResolvConf writes that address into the pods' /etc/resolv.conf.
//
// # Records
//
// The names follow the Kubernetes DNS specification
// (https://github.com/kubernetes/dns/blob/master/docs/specification.md),
// under the cluster domain (Config.Domain, cluster.local by default):
//
//	<svc>.<ns>.svc.<domain>            A/AAAA: the cluster IPs; headless: the ready endpoints
//	<host>.<svc>.<ns>.svc.<domain>     A/AAAA of a headless endpoint; <host> is its hostname or its address with dashes
//	_<port>._<proto>.<svc>.<ns>.svc... SRV for every named port
//	<svc>.<ns>.svc.<domain>            CNAME to spec.externalName for ExternalName services
//	a-b-c-d.<ns>.pod.<domain>          A a.b.c.d, for any address (as CoreDNS's "pods insecure")
//	d.c.b.a.in-addr.arpa               PTR of a cluster IP or of a headless endpoint
//	dns-version.<domain>               TXT: the version of the specification
//
// A headless service with no ready endpoints has no name (NXDOMAIN), as
// the specification says and CoreDNS does. Every cluster record has a TTL
// of 5 s; negative answers carry the SOA of the domain, whose minimum is
// also 5 s. Names are compared in lower case; answers keep the case of the
// question.
//
// Over UDP, answers larger than the client takes (512 bytes, or the size
// of its EDNS0 record but no more than 1232, to stay clear of IP
// fragments) are truncated with TC set; the client asks again over TCP.
//
// # Forwarding
//
// Names outside the domain, and reverse names of addresses the table does
// not hold, go to Config.Upstreams in order: over UDP, again over TCP when
// the answer is truncated, to the next upstream after an error, a timeout
// (2 s) or a SERVFAIL/REFUSED. Answers are cached in a bounded LRU (positive
// ones for their smallest TTL up to an hour, negative ones for the SOA
// minimum up to five minutes). With no upstream, or all of them failing,
// the answer is SERVFAIL.
//
// # Memory
//
// The table is a few maps keyed by lower-case names, built off to the side
// by Update and swapped in with one atomic store; queries read it without
// locks. Records are made per query, so the table holds only names and
// addresses. The only goroutines are those of github.com/miekg/dns (one
// per listener, one per UDP query or TCP connection).
package dns
