package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/backup"
	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/atomicfile"
)

func newSnapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back the cluster up to a file, or make a new cluster from one",
		Long: `Back the cluster up to a file, or make a new cluster from one.

A backup holds every object of the store at one revision, the node
credentials' hashes and the cluster CA. Its contents are encrypted with the
server token's secret (the Secrets are encrypted inside too), and checksummed:
a damaged file is refused with the offset of the damage. Servers write
backups on their own with --snapshot-dir.`,
	}
	cmd.AddCommand(newSnapshotSaveCommand(), newSnapshotRestoreCommand())
	return cmd
}

func newSnapshotSaveCommand() *cobra.Command {
	var addr string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Write a backup of the running cluster to FILE (run on a server)",
		Long: `Write a backup of the running cluster to FILE. Run it on any server: the
server takes the store at one revision that holds every write acknowledged
before the command (the cluster goes on meanwhile) and hands it over on its
admin socket (--admin-socket of isle server), which takes root.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			h, size, err := snapshotSave(ctx, addr, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "saved %s: cluster %s, revision %d, %d bytes, written by %s; restore it with the server token\n",
				args[0], h.ClusterID, h.Revision, size, h.Member)
			return err
		},
	}
	adminSocketFlag(cmd.Flags(), &addr)
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the backup")
	return cmd
}

// snapshotSave fetches a backup from the server's admin socket, checks
// it, and writes it to path atomically.
func snapshotSave(ctx context.Context, addr, path string) (backup.Header, int, error) {
	code, data, err := adminDo(ctx, http.MethodGet, addr, cluster.BackupPath, nil)
	if err != nil {
		return backup.Header{}, 0, fmt.Errorf("snapshot save: %w", err)
	}
	if code != http.StatusOK {
		return backup.Header{}, 0, fmt.Errorf("snapshot save: the server at %s answered %d: %s", addr, code, strings.TrimSpace(string(data)))
	}
	f, err := backup.Parse(path, data)
	if err != nil {
		return backup.Header{}, 0, fmt.Errorf("snapshot save: the server sent a damaged backup: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return backup.Header{}, 0, fmt.Errorf("snapshot save: %w", err)
	}
	return f.Header, len(data), nil
}

func newSnapshotRestoreCommand() *cobra.Command {
	var dataDir, token, tokenFile string
	cmd := &cobra.Command{
		Use:   "restore FILE --token-file F",
		Short: "Make a new cluster from a backup, on one server's empty data directory",
		Long: `Set up an empty data directory so that the server started on it next
(isle server --data-dir DIR, without --init or --join) makes a new cluster
from the backup FILE: every object as it was, a new cluster ID, and this
server as the only store member. The cluster keeps its CA and token: the
agents keep working with their credentials, and the backup's other servers,
with their data directories emptied, join the new cluster afresh
(--join ADDR --token-file F) under their old names.

--token-file is a file holding the cluster's token (the backup's contents
are encrypted with its secret), readable by its owner alone; --token gives
it on the command line, where every user of the board sees it. A directory in use by a running server, or holding one, is refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := takeTokenFile(&token, tokenFile); err != nil {
				return fmt.Errorf("snapshot restore: %w", err)
			}
			if token == "" {
				return errors.New("snapshot restore: --token-file is required: a file with the server token the backup was made with (a server's DATA-DIR/token)")
			}
			tok, err := wire.ParseToken(token)
			if err != nil {
				return fmt.Errorf("snapshot restore: --token: %w", err)
			}
			h, err := cluster.PrepareRestore(dataDir, args[0], tok)
			if err != nil {
				return fmt.Errorf("snapshot %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "prepared %s from %s (cluster %s, revision %d, taken %s by %s)\n"+
				"start the server now: isle server --data-dir %s (with its usual --name and --address)\n"+
				"then empty the data directories of the other servers (%s) and join them: isle server --join ADDR --token-file F\n",
				dataDir, args[0], h.ClusterID, h.Revision, h.Created.Format(time.RFC3339), h.Member, dataDir, strings.Join(h.Servers, ", "))
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "/var/lib/isle", "data directory of the server that makes the new cluster (empty or new)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the server token the backup was made with (mode 0600)")
	cmd.Flags().StringVar(&token, "token", "", "the server token the backup was made with (prefer --token-file)")
	return cmd
}
