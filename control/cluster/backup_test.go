package cluster

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/backup"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/raft/kv"
)

func TestPruneBackupsKeepsTheNewestOfThisServer(t *testing.T) {
	dir := t.TempDir()
	names := []string{
		"isle-pi1-20261201T000000Z-r10.snapshot", "isle-pi1-20261201T120000Z-r20.snapshot",
		"isle-pi1-20261202T000000Z-r30.snapshot", "isle-pi2-20261101T000000Z-r5.snapshot", "notes.txt",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := pruneBackups(dir, "isle-pi1-", 2); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	want := []string{"isle-pi1-20261201T120000Z-r20.snapshot", "isle-pi1-20261202T000000Z-r30.snapshot",
		"isle-pi2-20261101T000000Z-r5.snapshot", "notes.txt"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// testBackup writes a backup of a small real state for identity id.
func testBackup(t *testing.T, id Identity) string {
	t.Helper()
	store := kv.New(kv.Options{})
	state, err := store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := pki.Seal(id.CA.Signer().KeyPEM, id.Token.Secret, pki.InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h := backup.Header{ClusterID: "abc", Member: "pi1", Servers: []string{"pi1", "pi2"}, Created: time.Now(),
		CAHash: id.Token.CAHash, CACert: id.CA.CertPEM(), CAKeySealed: sealed}
	if err := backup.Write(&buf, h, state, id.Token.Secret); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.snapshot")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPrepareRestore(t *testing.T) {
	id, err := NewIdentity(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	file := testBackup(t, id)

	dir := filepath.Join(t.TempDir(), "data")
	h, err := PrepareRestore(dir, file, id.Token)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClusterID != "abc" || !RestorePending(dir) {
		t.Fatalf("header %+v, pending %v", h, RestorePending(dir))
	}
	got, err := LoadIdentity(dir)
	if err != nil || got.Token.String() != id.Token.String() || !bytes.Equal(got.CA.CertPEM(), id.CA.CertPEM()) {
		t.Fatalf("the restored identity: %v", err)
	}
	r, err := loadRestore(Config{DataDir: dir, Identity: got})
	if err != nil || !slices.Equal(r.forget, []string{"pi1", "pi2"}) {
		t.Fatalf("pending restore: %+v, %v; want both servers' names freed", r, err)
	}

	// A directory holding a server is refused.
	held := t.TempDir()
	if err := os.MkdirAll(filepath.Join(held, storeDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(held, storeDirName, "member.json"), []byte(`{"clusterID":1,"memberID":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(held, file, id.Token); err == nil || !strings.Contains(err.Error(), "holds a server already") {
		t.Fatalf("a directory holding a server: %v", err)
	}
	// Another cluster's token is refused, and nothing is written.
	other, err := NewIdentity(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "data")
	if _, err := PrepareRestore(empty, file, other.Token); !errors.Is(err, backup.ErrOtherCluster) {
		t.Fatalf("another cluster's token: %v", err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore wrote to the data directory: %v", err)
	}
}
