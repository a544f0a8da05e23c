package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// A replacement of the cluster CA (`isle certs rotate-ca`, docs/ca-rotation.md)
// is one record in the store, which every server follows and the leader
// moves on, phase by phase, once every server and board has done the
// phase's part:
//
//	/isle/ca-rotation                   the wire.CARotation
//	/isle/ca-rotation-applied/NAME      the phase server NAME has applied, with the new CA's hash
const (
	caRotationKey    = "/isle/ca-rotation"
	caAppliedPrefix  = "/isle/ca-rotation-applied/"
	CARotationPath   = "/ca-rotation" // on the admin socket: GET the status, POST to start
	caRotationLookup = time.Second    // how often a server looks at the record
)

// caRotator applies the recorded rotation to this server, and on the
// leader moves it on.
type caRotator struct {
	node    *raft.Node
	store   *registry.Store
	id      Identity
	name    string
	dataDir string
	// leaves are the server's certificates, issued anew from the new CA
	// in its phase; kubeconfigs asks for the recorded kubeconfigs' renewal.
	leaves     []*pki.Leaf
	kubeconfig chan<- struct{}
	log        *slog.Logger
	now        func() time.Time

	applied string // phase:hash applied here
}

// record is the rotation recorded, and its key's revision (0: none).
func (r *caRotator) record() (wire.CARotation, int64, error) {
	var rec wire.CARotation
	kvp, ok, _ := r.node.KV().Get(caRotationKey)
	if !ok {
		return rec, 0, nil
	}
	if err := json.Unmarshal(kvp.Value, &rec); err != nil {
		return rec, kvp.ModRevision, fmt.Errorf("%s: %w", caRotationKey, err)
	}
	return rec, kvp.ModRevision, nil
}

// run follows the record until ctx ends.
func (r *caRotator) run(ctx context.Context) {
	t := time.NewTicker(caRotationLookup)
	defer t.Stop()
	failed := ""
	for {
		if err := r.step(ctx); err != nil && err.Error() != failed && ctx.Err() == nil {
			failed = err.Error()
			r.log.Error("cluster: CA replacement stalled here; trying again every second", "err", err)
		} else if err == nil {
			failed = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step applies the record here, and on the leader moves it on.
func (r *caRotator) step(ctx context.Context) error {
	rec, rev, err := r.record()
	if err != nil || rev == 0 {
		return err
	}
	newKP, err := r.newKeyPair(rec)
	if err != nil {
		return err
	}
	mark := rec.Phase + ":" + wire.CAHash(newKP.Cert)
	if r.applied != mark {
		if err := r.apply(rec, newKP); err != nil {
			return err
		}
		r.applied = mark
		r.log.Info("cluster: CA replacement: phase applied", "phase", rec.Phase, "new-ca", wire.CAHash(newKP.Cert))
	}
	if cur, ok, _ := r.node.KV().Get(caAppliedPrefix + r.name); !ok || string(cur.Value) != mark {
		if _, err := r.node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: caAppliedPrefix + r.name, Value: []byte(mark), IfModRev: -1}); err != nil {
			return fmt.Errorf("record the phase applied: %w", err)
		}
	}
	if r.node.Leader() == r.node.ID() && rec.Phase != wire.CAPhaseDone {
		return r.advance(ctx, rec, rev, newKP)
	}
	return nil
}

// newKeyPair opens the new CA's key with the token's secret.
func (r *caRotator) newKeyPair(rec wire.CARotation) (*pki.KeyPair, error) {
	keyPEM, err := pki.Open(rec.NewKeySealed, r.id.secret(), pki.InfoCAKey)
	if err != nil {
		return nil, fmt.Errorf("the new CA's key does not open with this server's token: %w", err)
	}
	kp, err := pki.ParseKeyPair(rec.New, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the new CA: %w", err)
	}
	return kp, nil
}

// apply makes this server trust, sign and keep what rec's phase says.
func (r *caRotator) apply(rec wire.CARotation, newKP *pki.KeyPair) error {
	ca := r.id.CA
	old, err := wire.ParseCertPEM(rec.Old)
	if err != nil {
		return fmt.Errorf("the old CA: %w", err)
	}
	switch rec.Phase {
	case wire.CAPhaseTrustBoth:
		signer := ca.Signer()
		if !signer.Cert.Equal(old) {
			return fmt.Errorf("the CA replaced is %s, this server's is %s", wire.CAHash(old), wire.CAHash(signer.Cert))
		}
		ca.Rotate(signer, newKP.Cert)
		// Kept for a crash in the last phase (loadCA).
		if err := writeFile(r.dataDir, caNextCertFile, newKP.CertPEM); err != nil {
			return err
		}
		if err := writeFile(r.dataDir, caNextKeySealed, rec.NewKeySealed); err != nil {
			return err
		}
	case wire.CAPhaseIssueNew:
		ca.Rotate(newKP, old)
	case wire.CAPhaseDropOld, wire.CAPhaseDone:
		ca.Rotate(newKP)
		// The key first, then the certificate, then the token: loadCA
		// finds its way after a crash between any two.
		if err := writeFile(r.dataDir, caKeySealed, rec.NewKeySealed); err != nil {
			return err
		}
		if err := writeFile(r.dataDir, caCertFile, newKP.CertPEM); err != nil {
			return err
		}
		tok := r.id.token()
		tok.CAHash = wire.CAHash(newKP.Cert)
		if err := writeFile(r.dataDir, tokenFile, []byte(tok.String()+"\n")); err != nil {
			return err
		}
		removeNextCA(r.dataDir)
	default:
		return fmt.Errorf("phase %q: want %s, %s, %s or %s", rec.Phase, wire.CAPhaseTrustBoth, wire.CAPhaseIssueNew, wire.CAPhaseDropOld, wire.CAPhaseDone)
	}
	for _, l := range r.leaves {
		if _, err := l.Get(); err != nil {
			return err
		}
	}
	select {
	case r.kubeconfig <- struct{}{}:
	default:
	}
	return nil
}

// advance moves the rotation to its next phase once every server has
// applied this one and every board has done its part, or records whom it
// waits for.
func (r *caRotator) advance(ctx context.Context, rec wire.CARotation, rev int64, newKP *pki.KeyPair) error {
	waiting, err := r.waiting(ctx, rec, wire.CAHash(newKP.Cert))
	if err != nil {
		return err
	}
	next := rec
	if len(waiting) > 0 {
		if slices.Equal(waiting, rec.Waiting) {
			return nil
		}
		next.Waiting = waiting
	} else {
		next.Waiting = nil
		next.Phase = map[string]string{wire.CAPhaseTrustBoth: wire.CAPhaseIssueNew, wire.CAPhaseIssueNew: wire.CAPhaseDropOld,
			wire.CAPhaseDropOld: wire.CAPhaseDone}[rec.Phase]
	}
	b, _ := json.Marshal(next)
	ops := []kv.Op{{Type: kv.OpPut, Key: caRotationKey, Value: b, IfModRev: rev}}
	if next.Phase == wire.CAPhaseDropOld {
		ops = append(ops, kv.Op{Type: kv.OpPut, Key: caCertKey, Value: newKP.CertPEM, IfModRev: -1},
			kv.Op{Type: kv.OpPut, Key: caKeySealedKey, Value: rec.NewKeySealed, IfModRev: -1})
	}
	res, err := r.node.Propose(ctx, ops...)
	if err != nil {
		return fmt.Errorf("move on to %s: %w", next.Phase, err)
	}
	if !res.Succeeded {
		return nil // the record changed meanwhile: the next step reads it again
	}
	if next.Phase != rec.Phase {
		r.log.Info("cluster: CA replacement: next phase", "phase", next.Phase)
	}
	return nil
}

// waiting lists who has not done the phase's part yet: servers that have
// not applied it, and boards that do not trust the new CA yet, whose
// streaming certificate it has not signed yet (from its signing on), or
// that still trust the old one (once it is dropped).
func (r *caRotator) waiting(ctx context.Context, rec wire.CARotation, newHash string) ([]string, error) {
	var out []string
	mark := rec.Phase + ":" + newHash
	for _, m := range r.node.Members() {
		if v, ok, _ := r.node.KV().Get(caAppliedPrefix + m.Name); !ok || string(v.Value) != mark {
			out = append(out, fmt.Sprintf("server %s: not at %s yet", m.Name, rec.Phase))
		}
	}
	nodeRes, _ := r.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("nodes"))
	list, err := r.store.List(ctx, nodeRes, "", v1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the Nodes: %w", err)
	}
	for _, n := range list.(*corev1.NodeList).Items {
		a := n.Annotations
		switch {
		case !wire.TrustsCA(a[wire.AnnotationCATrust], newHash):
			out = append(out, fmt.Sprintf("board %s: does not trust the new CA yet", n.Name))
		case rec.Phase != wire.CAPhaseTrustBoth && a[wire.AnnotationCAIssuer] != newHash:
			out = append(out, fmt.Sprintf("board %s: its streaming certificate is not the new CA's yet", n.Name))
		case rec.Phase == wire.CAPhaseDropOld && a[wire.AnnotationCATrust] != newHash:
			out = append(out, fmt.Sprintf("board %s: still trusts the old CA", n.Name))
		}
	}
	slices.Sort(out)
	return out, nil
}

// caRotationHandler serves CARotationPath on the store API (loopback):
// GET the rotation's status, POST to start one.
func (r *caRotator) handler(w http.ResponseWriter, req *http.Request) {
	switch req.Method {
	case http.MethodGet:
		rec, rev, err := r.record()
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if rev == 0 {
			httpError(w, http.StatusNotFound, "the cluster CA has not been replaced: no rotation recorded")
			return
		}
		writeJSON(w, http.StatusOK, r.status(rec))
	case http.MethodPost:
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<10))
		rec, err := r.start(req.Context())
		var conflict *rotationConflict
		switch {
		case errors.As(err, &conflict):
			httpError(w, http.StatusConflict, err.Error())
		case err != nil:
			httpError(w, http.StatusServiceUnavailable, err.Error())
		default:
			writeJSON(w, http.StatusAccepted, r.status(rec))
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		httpError(w, http.StatusMethodNotAllowed, req.Method+" "+CARotationPath+": want GET or POST")
	}
}

// status is rec with, once done, the token of the new CA.
func (r *caRotator) status(rec wire.CARotation) wire.CARotationStatus {
	st := wire.CARotationStatus{CARotation: rec}
	st.NewKeySealed = nil
	if rec.Phase == wire.CAPhaseDone {
		if c, err := wire.ParseCertPEM(rec.New); err == nil {
			tok := r.id.token()
			tok.CAHash = wire.CAHash(c)
			st.Token = tok.String()
		}
	}
	return st
}

// rotationConflict is a rotation asked for while one is under way.
type rotationConflict struct{ phase string }

func (e *rotationConflict) Error() string {
	return fmt.Sprintf("a replacement of the CA is under way (phase %s): wait for it to end (isle certs rotate-ca --status)", e.phase)
}

// start records a new rotation: a new CA, trusted beside the current one.
func (r *caRotator) start(ctx context.Context) (wire.CARotation, error) {
	cur, rev, err := r.record()
	if err != nil {
		return cur, err
	}
	if rev != 0 && cur.Phase != wire.CAPhaseDone {
		return cur, &rotationConflict{cur.Phase}
	}
	kp, err := pki.NewKeyPair("isle-ca", r.now())
	if err != nil {
		return cur, err
	}
	sealed, err := pki.Seal(kp.KeyPEM, r.id.secret(), pki.InfoCAKey)
	if err != nil {
		return cur, err
	}
	rec := wire.CARotation{Phase: wire.CAPhaseTrustBoth, Old: r.id.CA.CertPEM(), New: kp.CertPEM, NewKeySealed: sealed, Started: r.now().UTC()}
	b, _ := json.Marshal(rec)
	res, err := r.node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: caRotationKey, Value: b, IfModRev: rev})
	if err != nil {
		return rec, fmt.Errorf("record the rotation: %w", err)
	}
	if !res.Succeeded {
		return rec, &rotationConflict{"just started"}
	}
	r.log.Info("cluster: CA replacement started", "old-ca", r.id.Token.CAHash, "new-ca", wire.CAHash(kp.Cert))
	return rec, nil
}

// caHandler serves wire.CAPath to boards (node credential).
func caHandler(ca *pki.CA, nodeOf func(string) (string, bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, ok := nodeOf(strings.TrimSpace(token)); !ok {
			httpError(w, http.StatusUnauthorized, "the CAs to trust are told to boards with their node credential (Authorization: Bearer)")
			return
		}
		writeJSON(w, http.StatusOK, wire.CAInfo{Bundle: ca.BundlePEM(), Signer: wire.CAHash(ca.Cert())})
	}
}
