package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/agent"
)

func newCertsCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Check the certificates of a board",
	}
	check := &cobra.Command{
		Use:   "check",
		Short: "List every certificate of a board's data directory with its expiry",
		Long: `List every certificate DATA-DIR holds or names: the cluster CA, the API
server's serving certificate and its client certificate to the boards'
streaming servers (a server's), the streaming server's certificate, and the
client certificates of the kubeconfigs written with isle kubeconfig -o.

A leaf is RENEW-SOON once three fifths of its life have passed: its holder
renews it within the hour, so one that stays RENEW-SOON is not being renewed
(a kubeconfig someone edited: write a new one). The CA is RENEW-SOON within a
year of its end. The command fails when a certificate is EXPIRED,
NOT-YET-VALID (a clock far behind) or unreadable, or the CA ends within a
year.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return certsCheck(cmd.OutOrStdout(), dataDir, time.Now())
		},
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "/var/lib/isle", "data directory of a board (server or agent)")
	cmd.AddCommand(check, newRotateCACommand())
	return cmd
}

// Labels of the kinds of certificates in the table.
var certKindLabels = map[string]string{
	wire.CertKindCA:         "cluster CA",
	wire.CertKindServing:    "API serving",
	wire.CertKindNodeClient: "API client to boards",
	wire.CertKindNode:       "streaming server",
	wire.CertKindKubeconfig: "kubeconfig",
}

// certsCheck writes the table of the certificates of dataDir at now to w,
// and fails when one is expired, not yet valid or unreadable, or the CA is
// within a year of its end.
func certsCheck(w io.Writer, dataDir string, now time.Time) error {
	files := cluster.ServerCertFiles(dataDir)
	if len(files) == 0 || files[0].Kind != wire.CertKindCA {
		// An agent's board: the CA is in its credential.
		cred, ok, err := wire.LoadCredential(dataDir)
		path := filepath.Join(dataDir, wire.CredentialFile)
		var cas []cluster.CertFile
		if err != nil {
			cas = append(cas, cluster.CertFile{Kind: wire.CertKindCA, Path: path, Err: err})
		} else if ok {
			// Two while the CA is replaced.
			certs, err := wire.ParseCertsPEM(cred.CACert)
			if err != nil {
				cas = append(cas, cluster.CertFile{Kind: wire.CertKindCA, Path: path, Err: err})
			}
			for _, c := range certs {
				cas = append(cas, cluster.CertFile{Kind: wire.CertKindCA, Path: path, Cert: c})
			}
		}
		files = append(cas, files...)
	}
	path := filepath.Join(dataDir, agent.ServingCertFile)
	if b, err := os.ReadFile(path); !errors.Is(err, fs.ErrNotExist) {
		cf := cluster.CertFile{Kind: wire.CertKindNode, Path: path, Err: err}
		if err == nil {
			cf.Cert, cf.Err = wire.ParseCertPEM(b)
		}
		files = append(files, cf)
	}
	if len(files) == 0 {
		return fmt.Errorf("certs check: %s holds no certificates: is it the data directory of an isle board (--data-dir)?", dataDir)
	}

	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tSUBJECT\tISSUER\tNOT AFTER\tLEFT\tSTATE\tFILE")
	var bad, warnings []string
	for _, f := range files {
		if f.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tERROR\t%s: %v\n", certKindLabels[f.Kind], f.Path, f.Err)
			if f.Kind == wire.CertKindKubeconfig {
				// A user's file, since changed: not isle's any more.
				warnings = append(warnings, fmt.Sprintf("%s is no kubeconfig isle can renew: %v", f.Path, f.Err))
			} else {
				bad = append(bad, f.Path+" unreadable")
			}
			continue
		}
		c := f.Cert
		state := pki.State(c, now)
		left := c.NotAfter.Sub(now)
		leftText := duration.HumanDuration(left)
		if left < 0 {
			leftText = "-" + duration.HumanDuration(-left)
		}
		file := f.Path
		if f.Edited {
			file += " (edited: not renewed)"
			if state != pki.StateExpired {
				warnings = append(warnings, fmt.Sprintf("%s was edited since isle wrote it: its certificate is not renewed and expires in %s; write a new one with isle kubeconfig -o",
					f.Path, leftText))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", certKindLabels[f.Kind], c.Subject.CommonName, c.Issuer.CommonName,
			c.NotAfter.UTC().Format(time.RFC3339), leftText, state, file)
		switch {
		case state == pki.StateExpired || state == pki.StateNotYetValid:
			bad = append(bad, fmt.Sprintf("%s %s %s", certKindLabels[f.Kind], c.Subject.CommonName, state))
		case state == pki.StateRenewSoon && f.Kind == wire.CertKindCA:
			bad = append(bad, fmt.Sprintf("the cluster CA expires in %s, on %s: replace it before then",
				duration.HumanDuration(left), c.NotAfter.UTC().Format(time.DateOnly)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, warning := range warnings {
		fmt.Fprintln(w, "warning: "+warning)
	}
	if len(bad) > 0 {
		return fmt.Errorf("certs check: %d problems: %v", len(bad), bad)
	}
	return nil
}
