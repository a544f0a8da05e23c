package main

import (
	"github.com/spf13/cobra"
)

// newRootCommand builds the command tree. Commands are built by functions and
// registered here, in one place; nothing registers itself from init().
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "isle",
		Short:         "isle: a Kubernetes-compatible cluster appliance for Raspberry Pi boards",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		newVersionCommand(),
		newServerCommand(),
		newAgentCommand(),
		newMemberCommand(),
		newTokenCommand(),
		newUserCommand(),
		newSecretsCommand(),
		newStoreCommand(),
		newSnapshotCommand(),
		newKubeconfigCommand(),
		newCertsCommand(),
		newImagesCommand(),
		newUpCommand(),
		newDownCommand(),
		newBoardCommand(),
		newStatusCommand(),
		newMapCommand(),
		newVIPCommand(),
		newUninstallCommand(),
		newFirstbootCommand(),
		newImageCommand(),
	)
	return root
}
