// Package pki holds the cluster's certificates and secrets for isle's API
// server: the cluster CA and the certificates it issues, the join token,
// encryption at rest of secrets kept in the replicated store, TLS
// configurations, node bearer tokens and admin kubeconfigs.
//
// It uses the standard library only (ECDSA P-256, X.509, HKDF-SHA256,
// AES-256-GCM), plus sigs.k8s.io/yaml to write kubeconfigs.
//
// # Certificates
//
// NewCA makes a self-signed CA valid for ten years; IssueServing and
// IssueClient make one-year leaves with fresh P-256 keys. Client
// certificates follow Kubernetes' convention: the common name is the user
// and the organizations are its groups (the admin is CN=isle-admin,
// O=system:masters). Every NotBefore is backdated by ClockSkew, because
// boards without a real-time clock may boot with a clock slightly behind.
// wire.CAHash is kubeadm's discovery-token-ca-cert-hash: "sha256:" followed by
// the hex SHA-256 of the CA's SubjectPublicKeyInfo.
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
// certificate (CN=wire.APIServerUser, from ClientConfig, which renews it when
// wire.RenewalDue), and the API servers verify it by the node's name.
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
