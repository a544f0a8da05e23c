package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/isle-cluster/isle/node/containers"
)

type imagesFlags struct {
	containerd, namespace string
}

func newImagesCommand() *cobra.Command {
	var f imagesFlags
	cmd := &cobra.Command{
		Use:   "images",
		Short: "The board's container images: import archives for boards without a registry, list",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.containerd, "containerd", "/run/containerd/containerd.sock", "containerd's socket")
	pf.StringVar(&f.namespace, "containerd-namespace", "isle", "containerd namespace of isle's containers")
	cmd.AddCommand(&cobra.Command{
		Use:   "import FILE.tar...",
		Short: "Load images from archives (docker save, or an OCI image layout tar) for this board's platform",
		Long: `Load images from archives into the board's containerd, for air-gapped boards:
pods whose imagePullPolicy is IfNotPresent (the default for a tagged image)
or Never then run them without a registry. Archives come from ` + "`docker save`" + ` or
any tool writing an OCI image layout as a tar.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := f.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer rt.Close()
			for _, path := range args {
				file, err := os.Open(path)
				if err != nil {
					return fmt.Errorf("images import: %w", err)
				}
				names, err := rt.Import(cmd.Context(), file)
				file.Close()
				if err != nil {
					return fmt.Errorf("images import %s: %w", path, err)
				}
				for _, n := range names {
					fmt.Fprintf(cmd.OutOrStdout(), "imported %s\n", n)
				}
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the board's images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := f.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer rt.Close()
			imgs, err := rt.Images(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "IMAGE\tID\tSIZE")
			for _, i := range imgs {
				fmt.Fprintf(w, "%s\t%s\t%s\n", i.Ref, i.ID, resource.NewQuantity(i.Size, resource.BinarySI))
			}
			return w.Flush()
		},
	})
	return cmd
}

func (f imagesFlags) connect(ctx context.Context) (*containers.Runtime, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return containers.Connect(ctx, containers.Config{Address: f.containerd, Namespace: f.namespace, FIFODir: os.TempDir()})
}
