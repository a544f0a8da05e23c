package main

import (
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/node/vip"
)

// newVIPCommand is `isle vip drain`: what a leader of this release does
// before it hands leadership on, for a leader of a release that does not
// (the upgrade from it, README *Upgrades*).
func newVIPCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "vip", Short: "The floating API address on this board"}
	var addr string
	drain := &cobra.Command{
		Use:   "drain --vip ADDR",
		Short: "Hold back new connections to the floating address on this board (before its leader of an older release hands leadership on)",
		Long: `Drop new TCP connections to the floating address on this board (their clients
send them again a second later, to the board that holds it then), so that the
requests this board has accepted are answered before the address moves. A
server of this release does it by itself when it stops; for a leader of an
older release, run this on its board a second before transferring leadership.
The rule goes when isle of this release starts on the board, or with
isle vip drain --undo.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := netip.ParseAddr(addr)
			if err != nil {
				return fmt.Errorf("vip drain: --vip %q: %w", addr, err)
			}
			c := vip.Config{VIP: a}
			if undo, _ := cmd.Flags().GetBool("undo"); undo {
				return vip.Undrain()
			}
			if _, err := vip.Drain(c); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "new connections to %s are held back on this board\n", a)
			return err
		},
	}
	drain.Flags().StringVar(&addr, "vip", "", "the floating API address (isle server --vip)")
	drain.Flags().Bool("undo", false, "remove the rule")
	cmd.AddCommand(drain)
	return cmd
}
