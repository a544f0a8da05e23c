// Package wire is isle's own side protocol between the boards and the
// servers, the /isle/v1 paths beside the Kubernetes API: what travels
// (paths, request and response types, their bounds and their checks),
// never how a server answers it. The control plane serves it; node
// agents and the command line are its clients, and this package is the
// one part of control/ they import.
//
// Usage reports (stats.go): every ReportInterval an agent POSTs one
// Report (JSON, at most MaxReportBytes) to ReportPath on each alive
// server's API address, authenticated by its node credential; the usage
// in it is the average over [timestamp-window, timestamp], as in
// metrics.k8s.io. A report is checked whole by Report.Validate (names,
// quantities, window, clock skew, bounds); package control/metrics keeps
// what it says.
//
// Join tokens and pinning (token.go, tls.go): a Token is the CA's hash
// (CAHash) and a secret, written ISLE1::<hash>::<secret>; a board that
// knows only the token reaches a server with PinnedClientConfig, which
// accepts a server whose chain holds the pinned CA (ErrClock when only the
// board's clock is wrong).
//
// The servers' time (time.go): a board whose clock may be far behind (a
// Raspberry Pi has no real-time clock) GETs TimePath before it checks any
// certificate, over TimeClientConfig, and takes the answer only if
// CheckServerTime accepts it with the server's certificates; time.go says
// why this and not SNTP.
//
// Joining and membership (join.go): a board POSTs a JoinRequest to
// JoinPath, authenticated by the token's secret, and gets a JoinResponse
// (the CA, its node credential, the gossip key; for a server, what its
// store member needs); MembersPath lists and removes boards.
//
// A joined board's credential (credential.go): its name, node token, the
// CA, the gossip key and the servers it last saw, in CredentialFile of its
// data directory (0600, written atomically, only when the servers change).
//
// Certificates of the boards (cert.go): a node agent asks for its serving
// certificate with a request from NewCSR, replaces it when RenewalDue (at
// three fifths of its life, looking every RenewalWait), and
// accepts the API servers' client certificate by its user, APIServerUser.
package wire
