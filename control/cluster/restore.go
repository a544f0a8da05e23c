package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/isle-cluster/isle/control/backup"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/atomicfile"
	"github.com/isle-cluster/isle/raft/kv"
)

// restoreFile, in a server's data directory, is a backup its next start
// makes a new cluster from (PrepareRestore puts it there); it is removed
// once the restored store runs and the old servers' names are free.
const restoreFile = "restore.snapshot"

// PrepareRestore checks the backup file and the data directory dataDir
// and sets the directory up so that the server started on it next makes a
// new cluster from the backup: the identity (the token tok, which must be
// the backup's cluster's, and the CA) and the backup itself. The new
// cluster has a new cluster ID and this server as its only store member;
// the backup's other servers join it afresh (their names are freed), its
// agents keep their credentials. It refuses a directory in use by a
// running server or holding one.
func PrepareRestore(dataDir, file string, tok wire.Token) (backup.Header, error) {
	used, err := raft.InUse(filepath.Join(dataDir, storeDirName))
	if err != nil {
		return backup.Header{}, fmt.Errorf("restore: %w", err)
	}
	if used {
		return backup.Header{}, fmt.Errorf("restore: %s is in use by a running server (its store is locked): stop it, and restore into an empty data directory", dataDir)
	}
	if HasServer(dataDir) {
		return backup.Header{}, fmt.Errorf("restore: %s holds a server already: restore into an empty data directory (move this one away first)", dataDir)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return backup.Header{}, fmt.Errorf("restore: %w", err)
	}
	f, err := backup.Parse(file, data)
	if err != nil {
		return backup.Header{}, fmt.Errorf("restore: %w", err)
	}
	state, err := f.Open(tok)
	if err != nil {
		return f.Header, fmt.Errorf("restore: %w", err)
	}
	keyPEM, err := pki.Open(f.Header.CAKeySealed, tok.Secret, pki.InfoCAKey)
	if err != nil {
		return f.Header, fmt.Errorf("restore: %s: the CA key: %w", file, err)
	}
	ca, err := pki.ParseCA(f.Header.CACert, keyPEM)
	if err != nil {
		return f.Header, fmt.Errorf("restore: %s: %w", file, err)
	}
	if wire.CAHash(ca.Cert()) != tok.CAHash {
		return f.Header, fmt.Errorf("restore: %s: its CA certificate does not match its CA hash %s", file, tok.CAHash)
	}
	if err := kv.New(kv.Options{}).Restore(state); err != nil {
		return f.Header, fmt.Errorf("restore: %s: the store's state: %w", file, err)
	}
	if err := saveIdentity(dataDir, Identity{Token: tok, CA: ca}); err != nil {
		return f.Header, fmt.Errorf("restore: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dataDir, restoreFile), data, fileMode); err != nil {
		return f.Header, fmt.Errorf("restore: %w", err)
	}
	return f.Header, nil
}

// RestorePending reports whether dataDir holds a backup that the server's
// next start restores (or finishes restoring).
func RestorePending(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, restoreFile))
	return err == nil
}

// pendingRestore is a prepared restore: the state to seed the store with
// and the names of the backup's servers to free.
type pendingRestore struct {
	header backup.Header
	state  []byte
	forget []string
}

// loadRestore reads the restore file of cfg.DataDir, if there is one. The
// backup's servers' names are freed, so that they join afresh, except the
// name whose credential this server still holds.
func loadRestore(cfg Config) (*pendingRestore, error) {
	path := filepath.Join(cfg.DataDir, restoreFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	f, err := backup.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	state, err := f.Open(cfg.Identity.Token)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	r := &pendingRestore{header: f.Header, state: state}
	cred, held, err := wire.LoadCredential(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	for _, name := range f.Header.Servers {
		if !held || name != cred.Name {
			r.forget = append(r.forget, name)
		}
	}
	slices.Sort(r.forget)
	return r, nil
}

// finishRestore frees the names of the backup's servers in the restored
// store, then removes the restore file.
func (s *Server) finishRestore(r *pendingRestore) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range r.forget {
		for {
			err := forgetNode(ctx, s.node, name)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("restore: free the name of server %s: %w", name, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if err := os.Remove(filepath.Join(s.cfg.DataDir, restoreFile)); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := atomicfile.SyncDir(s.cfg.DataDir); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	s.cfg.Logger.Info("cluster: restored from a backup; the other servers join afresh, agents keep their credentials",
		"backup-cluster", r.header.ClusterID, "revision", r.header.Revision, "taken", r.header.Created,
		"cluster", fmt.Sprintf("%x", s.node.ClusterID()), "freed", r.forget)
	return nil
}
