package cluster

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
)

// TestKubeconfigRenewal writes kubeconfigs as `isle kubeconfig -o` does
// and has the server's loop renew them with ten-second certificates: a
// file as written is renewed in place (mode kept), an edited one is left
// alone, a removed one is nothing to do.
func TestKubeconfigRenewal(t *testing.T) {
	dir := t.TempDir()
	// A cluster made 364 days ago, with kubeconfigs of that day.
	then := time.Now().Add(-364 * 24 * time.Hour)
	id, err := NewIdentity(dir, then)
	if err != nil {
		t.Fatal(err)
	}
	id.CA.LeafValidity = 10 * time.Second
	files := t.TempDir()
	kept, edited, removed := filepath.Join(files, "kept"), filepath.Join(files, "edited"), filepath.Join(files, "removed")
	for _, f := range []string{kept, edited, removed, kept} {
		if err := WriteAdminKubeconfig(dir, "https://127.0.0.1:6443", f, then); err != nil {
			t.Fatal(err)
		}
	}
	if rec, err := loadKubeconfigRecord(dir); err != nil || len(rec.Files) != 3 {
		t.Fatalf("record %v, %v; want the three files once each", rec, err)
	}
	if err := os.Chmod(kept, 0o640); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(edited)
	editedText := strings.Replace(string(b), "current-context:", "# mine\ncurrent-context:", 1) + "extensions: []\n"
	if err := os.WriteFile(edited, []byte(editedText), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(removed); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(kept)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		renewKubeconfigs(ctx, dir, id.CA, time.Now, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, _ := os.ReadFile(kept)
		if string(after) != string(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kubeconfig was not renewed in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	after, _ := os.ReadFile(kept)
	cert, renewable, err := pki.KubeconfigClientCert(after, adminUser)
	if err != nil || !renewable || cert.Subject.CommonName != "isle-admin" || wire.RenewalDue(cert, time.Now()) {
		t.Fatalf("renewed kubeconfig: %v, %v, %v; want a fresh certificate of isle-admin", cert, renewable, err)
	}
	if fi, _ := os.Stat(kept); fi.Mode().Perm() != 0o640 {
		t.Fatalf("renewed file mode %v, want 0640 as it was", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(edited); string(b) != editedText {
		t.Fatal("an edited kubeconfig was rewritten")
	}
	if _, err := os.Stat(removed); !os.IsNotExist(err) {
		t.Fatalf("a removed kubeconfig: %v; want it still gone", err)
	}
	// isle certs check's view: the CA and the two kubeconfigs left.
	var kinds []string
	for _, f := range ServerCertFiles(dir) {
		kinds = append(kinds, f.Kind+":"+filepath.Base(f.Path))
		if f.Err != nil || f.Edited != (f.Path == edited) {
			t.Errorf("%s: %v, edited %v", f.Path, f.Err, f.Edited)
		}
	}
	if got := strings.Join(kinds, " "); got != "ca:ca.crt kubeconfig:kept kubeconfig:edited" {
		t.Fatalf("ServerCertFiles: %s", got)
	}
}
