package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
)

// maxCSRBytes bounds a certificate request (a P-256 one is under 1 KiB).
const maxCSRBytes = 16 << 10

// servingCertHandler issues the certificates of the boards' streaming
// servers (POST wire.ServingCertPath, package agent has the exchange).
// It is authenticated by the board's node credential, not by the cluster
// token, and the certificate is for the node the credential belongs to,
// whatever the request names; pki.IssueNodeServing decides what else the
// certificate may (not) carry. Boards that joined before streaming servers
// existed ask with the credential they have: no join again.
type servingCertHandler struct {
	ca *pki.CA
	// nodeOf returns the node a bearer token is the credential of.
	nodeOf func(token string) (node string, ok bool)
	// members are the store's members: a board must not get a certificate
	// for the host name another server's API is reached at.
	members func() []raft.Member
	log     *slog.Logger
	now     func() time.Time
}

func (h *servingCertHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: want POST", r.Method, r.URL.Path))
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	node, ok := h.nodeOf(strings.TrimSpace(token))
	if !ok {
		h.log.Warn("cluster: serving certificate refused: no node credential", "from", r.RemoteAddr)
		httpError(w, http.StatusUnauthorized, "a serving certificate needs the board's node credential (Authorization: Bearer)")
		return
	}
	csr, err := io.ReadAll(io.LimitReader(r.Body, maxCSRBytes+1))
	switch {
	case err != nil:
		httpError(w, http.StatusBadRequest, fmt.Sprintf("serving certificate for %q: read the request: %v", node, err))
		return
	case len(csr) > maxCSRBytes:
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("serving certificate for %q: the certificate request is over %d bytes", node, maxCSRBytes))
		return
	}
	for _, m := range h.members() {
		if host, _, err := net.SplitHostPort(m.ClientAddr); err == nil && host == node && m.Name != node {
			h.log.Warn("cluster: serving certificate refused: the name is a server's API host", "node", node, "server", m.Name)
			httpError(w, http.StatusForbidden, fmt.Sprintf("serving certificate for %q: server %s's API is reached at that name; rename the board", node, m.Name))
			return
		}
	}
	cert, err := h.ca.IssueNodeServing(node, csr, h.now())
	switch {
	case errors.Is(err, pki.ErrReservedName):
		h.log.Warn("cluster: serving certificate refused", "node", node, "err", err)
		httpError(w, http.StatusForbidden, err.Error()+"; rename the board")
		return
	case err != nil:
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	h.log.Info("cluster: serving certificate issued", "node", node, "from", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/x-pem-file")
	_, _ = w.Write(cert)
}

// isleHandler serves the paths under /isle/ that are not the Kubernetes
// API's: the serving certificates and the CAs to trust (node credential), the server's time
// (no authentication, see wire.TimePath) and the rest, which the join
// handler authenticates with the cluster token.
func isleHandler(certs *servingCertHandler, join *joinHandler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(wire.ServingCertPath, certs)
	mux.Handle("GET "+wire.CAPath, caHandler(certs.ca, certs.nodeOf))
	mux.HandleFunc("GET "+wire.TimePath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, wire.TimeResponse{Time: certs.now()})
	})
	mux.Handle("/", join)
	return mux
}
