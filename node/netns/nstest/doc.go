// Package nstest is for tests: it holds the helpers that tests of several
// packages use to build a small network out of network namespaces and
// send traffic through it. Nothing but tests imports it.
//
// The helpers that make something take the test, fail it on an error and
// undo what they made at the test's cleanup: NS makes a namespace (with
// node/netns); Handle and NFTables reach inside one with netlink and
// nftables; Veth and AddrUp link namespaces together; Listen listens
// inside one, and ServeTCP and ServeUDP run servers there that answer
// "NAME saw SOURCE", which Ask, connecting from another namespace,
// returns; ClosedAddr is a loopback port held where nothing listens.
// RequireRoot and RequireNetfilter skip a test that cannot run
// here (on CI, where everything must run, RequireRoot fails it instead).
package nstest
