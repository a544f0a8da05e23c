package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/control/backup"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/atomicfile"
)

// BackupPath serves a backup of the store, on the store's loopback
// socket (AdminSocket) only: `isle snapshot save` fetches it there.
const BackupPath = "/backup/v1/snapshot"

// BackupSchedule makes a server write backups on its own (isle server
// --snapshot-dir). The zero value writes none.
type BackupSchedule struct {
	// Dir receives the files; empty: no scheduled backups.
	Dir string
	// Interval between two backups. Default 12h.
	Interval time.Duration
	// Keep is how many of this server's backups Dir keeps. Default 5.
	Keep int
}

func (b *BackupSchedule) validate() error {
	if b.Dir == "" {
		return nil
	}
	if b.Interval == 0 {
		b.Interval = 12 * time.Hour
	}
	if b.Keep == 0 {
		b.Keep = 5
	}
	switch {
	case b.Interval < time.Second:
		return fmt.Errorf("cluster: backup interval %v: want at least 1s", b.Interval)
	case b.Keep < 1:
		return fmt.Errorf("cluster: backups to keep %d: want at least 1", b.Keep)
	}
	return nil
}

// backupData takes the store's state at one revision and returns it as a
// backup file.
func backupData(ctx context.Context, node *raft.Node, id Identity, name string) ([]byte, backup.Header, error) {
	b, err := node.Backup(ctx)
	if err != nil {
		return nil, backup.Header{}, fmt.Errorf("backup: %w", err)
	}
	sealed, err := pki.Seal(id.CA.Signer().KeyPEM, id.secret(), pki.InfoCAKey)
	if err != nil {
		return nil, backup.Header{}, fmt.Errorf("backup: %w", err)
	}
	h := backup.Header{ClusterID: strconv.FormatUint(b.ClusterID, 16), Member: name, Revision: b.Revision, Index: b.Index,
		Created: time.Now().UTC(), CAHash: id.Token.CAHash, CACert: id.CA.CertPEM(), CAKeySealed: sealed}
	for _, m := range b.Members {
		h.Servers = append(h.Servers, m.Name)
	}
	var buf bytes.Buffer
	buf.Grow(len(b.KV) + len(b.KV)/64 + 8192)
	if err := backup.Write(&buf, h, b.KV, id.secret()); err != nil {
		return nil, h, err
	}
	return buf.Bytes(), h, nil
}

// backupHandler serves BackupPath.
func backupHandler(node *raft.Node, id Identity, name string, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		data, h, err := backupData(ctx, node, id, name)
		if err != nil {
			log.Warn("cluster: backup failed", "err", err)
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		log.Info("cluster: backup served", "revision", h.Revision, "bytes", len(data), "took", time.Since(start))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
	}
}

// backupFilePrefix and backupFileExt make the names of a server's
// scheduled backups: isle-NAME-20060102T150405Z-rREVISION.snapshot, which
// sort by time.
const (
	backupFilePrefix = "isle-"
	backupFileExt    = ".snapshot"
)

// scheduleBackups writes a backup to sched.Dir every sched.Interval until
// ctx ends, keeping the newest sched.Keep of this server's.
func scheduleBackups(ctx context.Context, node *raft.Node, id Identity, name string, sched BackupSchedule, log *slog.Logger) {
	if sched.Dir == "" {
		return
	}
	t := time.NewTicker(sched.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		path, err := writeScheduledBackup(ctx, node, id, name, sched)
		if err != nil {
			log.Error("cluster: scheduled backup failed", "dir", sched.Dir, "err", err)
			continue
		}
		log.Info("cluster: scheduled backup written", "file", path)
	}
}

func writeScheduledBackup(ctx context.Context, node *raft.Node, id Identity, name string, sched BackupSchedule) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	data, h, err := backupData(ctx, node, id, name)
	if err != nil {
		return "", err
	}
	prefix := backupFilePrefix + name + "-"
	path := filepath.Join(sched.Dir, fmt.Sprintf("%s%s-r%d%s", prefix, h.Created.Format("20060102T150405Z"), h.Revision, backupFileExt))
	if err := atomicfile.Write(path, data, fileMode); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	return path, pruneBackups(sched.Dir, prefix, sched.Keep)
}

// pruneBackups removes all but the newest keep files of dir named
// prefix*.snapshot.
func pruneBackups(dir, prefix string, keep int) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup: prune %s: %w", dir, err)
	}
	var names []string
	for _, de := range des {
		if n := de.Name(); de.Type().IsRegular() && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, backupFileExt) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var errs []error
	for _, n := range names[:max(0, len(names)-keep)] {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("backup: prune: %w", err))
		}
	}
	return errors.Join(errs...)
}
