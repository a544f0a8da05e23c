package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/images"
)

func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build flashable SD-card images for Raspberry Pi boards",
	}
	var o images.Options
	build := &cobra.Command{
		Use:   "build --board BOARD --role ROLE --isle ARM64-BINARY",
		Short: "Build an SD-card image: Debian bookworm arm64, containerd and isle, configured at first boot from isle.yaml",
		Long: `Build a flashable SD-card image for a Raspberry Pi board, as root: a Debian
bookworm arm64 root filesystem (mmdebstrap under qemu-user, from the
machine's Debian mirror unless --mirror; cached in --cache by its package
list, so a rebuild that only changes isle takes seconds), isle's arm64
binary and units, and isle.yaml.example on the boot partition.

Flash OUT.zst (or OUT) to a card, copy isle.yaml.example to isle.yaml on its
boot partition and set the token, and power the board on: its first boot
applies isle.yaml and starts isle in the image's role.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err := images.Build(ctx, o)
			return err
		},
	}
	fl := build.Flags()
	fl.StringVar(&o.Board, "board", "rpi4", "the board: rpi3, rpi4 or zero2w")
	fl.StringVar(&o.Role, "role", "agent", "the board's role: agent (runs pods) or server (also a control-plane member)")
	fl.StringVar(&o.Isle, "isle", "out/isle-linux-arm64", "isle's static linux/arm64 binary (make cross)")
	fl.StringVar(&o.Out, "out", "", "the image file (default out/isle-BOARD-ROLE.img); its compressed form is OUT.zst with OUT.zst.sha256")
	fl.BoolVar(&o.NoCompress, "no-compress", false, "write the raw image only")
	fl.StringVar(&o.CacheDir, "cache", "/var/cache/isle-image", "directory that keeps root filesystems between builds")
	fl.StringVar(&o.Mirror, "mirror", "", "the Debian mirror's URL (default: the one this machine's apt uses)")
	build.PreRun = func(*cobra.Command, []string) {
		if o.Out == "" {
			o.Out = filepath.Join("out", "isle-"+o.Board+"-"+o.Role+".img")
		}
	}
	cmd.AddCommand(build)
	return cmd
}
