// Package pki holds the cluster's certificates and secrets for isle's API
// server: the cluster CA and the certificates it issues (the store
// members' among them, member.go), sealing of the CA key (and of backups'
// contents and the Secrets' keys), TLS configurations, node bearer tokens
// and admin kubeconfigs. The Secrets themselves are encrypted in the
// store by control/cluster (secretskeys.go).
//
// It uses the standard library only (ECDSA P-256, X.509, HKDF-SHA256,
// AES-256-GCM), plus sigs.k8s.io/yaml to write kubeconfigs.
//
// # Certificates
//
// NewCA makes a self-signed CA valid for ten years; IssueServing and
// IssueClient make leaves with fresh P-256 keys, valid for the CA's
// LeafValidity (a year unless a test shortens it, `isle server
// --cert-validity`) and never past the CA's end. Client certificates
// follow Kubernetes' convention: the common name is the user and the
// organizations are its groups (the admin is CN=isle-admin,
// O=system:masters). Every NotBefore is backdated by ClockSkew (a tenth of
// a short validity at most), because boards without a real-time clock may
// boot with a clock slightly behind. wire.CAHash is kubeadm's
// discovery-token-ca-cert-hash: "sha256:" followed by the hex SHA-256 of the
// CA's SubjectPublicKeyInfo.
//
// # Renewal
//
// No certificate lapses while its holder runs: each is renewed at three
// fifths of its life (wire.RenewalDue), its holder looking at least hourly
// (wire.RenewalWait), so a year's certificate is replaced months before it
// ends and well before two thirds of its life. A Leaf is a certificate a
// process holds and hands to TLS (GetCertificate, GetClientCertificate):
// renewed at the handshake that finds it due and by Leaf.Run ahead of
// handshakes; connections made before go on with the old one.
//
//	certificate                     holder, renewal                                 file (for isle certs check)
//	CA (10 years)                   every server; not renewed: warned a year ahead  DATA/pki/ca.crt, the credential's CA
//	API serving, per server         the server: ServingLeaf, ServerConfig           DATA/pki/apiserver.crt
//	API client to streaming servers the server: ClientLeaf, ClientConfig            DATA/pki/apiserver-node-client.crt
//	streaming server, per board     the board's agent, from the servers (a CSR)     DATA/node-serving.pem
//	admin kubeconfigs               the server whose data dir wrote them (-o FILE)  the FILEs, listed in DATA/pki/kubeconfigs.json
//	(Raft members' mutual TLS)      not yet: a ServingLeaf and a ClientLeaf each, served as the API's are
//
// RenewKubeconfig renews a kubeconfig only as Kubeconfig wrote it: one
// edited since is not isle's to rewrite. Node credentials are bearer
// tokens, which do not expire. State says what `isle certs check` shows of
// a certificate: OK, RENEW-SOON (a leaf due, the CA within CAWarning, a
// year, of its end), EXPIRED or NOT-YET-VALID. A year before the CA ends
// the leader records a Warning Event (package caexpiry), and the servers
// and agents export wire.CertExpiryMetric. Replacing the CA itself is not
// built yet.
//
// # Node agents' serving certificates
//
// A node agent's streaming server (kubectl logs, exec and attach, which the
// API servers proxy to it) serves a certificate from IssueNodeServing: the
// board sends a certificate request (wire.NewCSR) for a key it keeps, and the
// CA signs that key for the DNS name of the node the board's credential
// belongs to, and nothing else: no IP addresses and none of the names API
// server certificates carry, because clients of the API servers trust the
// same CA. The streaming server accepts only the API servers' client
// certificate (CN=wire.APIServerUser, a ClientLeaf), and the API servers
// verify it by the node's name.
//
// # Join token
//
// A join token lets a new node trust the cluster (by pinning the CA's
// public key) and prove it was invited. Its text form is
//
//	ISLE1::<64 lowercase hex: SHA-256 of the CA's SubjectPublicKeyInfo>::<32 base32 chars: 160-bit secret>
//
// where the secret uses the RFC 4648 alphabet in lower case (a-z, 2-7)
// without padding. Package wire has the format (wire.Token, wire.ParseToken,
// which accepts either case and surrounding blanks) and the joiner's side:
// a joiner that knows only the token connects with wire.PinnedClientConfig: the
// server must send the CA certificate in its chain (ServerConfig does), and
// the connection is accepted only if that CA's key matches the hash and the
// leaf verifies against it.
//
// # Sealed secrets
//
// Seal encrypts with AES-256-GCM under a key derived from a secret (the
// join token's) by HKDF-SHA256 with a random salt per message and a caller
// chosen info string (InfoCAKey for the CA key). The sealed blob is
//
//	version (1 byte, 0x01) | salt (16 bytes) | nonce (12 bytes) | ciphertext | GCM tag (16 bytes)
//
// and the version byte and salt are authenticated as additional data. Open
// returns ErrDecrypt when authentication fails (wrong secret, wrong info or
// tampering) and an error wrapping ErrSealedFormat when the blob cannot be
// one of ours.
//
// # Bearer tokens
//
// Node bearer tokens are "<id>.<secret>": a 6-character id by which the
// server finds the token and a 32-character secret, both [a-z0-9]. The
// server stores only HashBearer(token), the hex SHA-256 of the whole token,
// and checks a presented token with BearerMatches.
package pki
