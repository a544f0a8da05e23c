// Command isle is the single binary of an isle cluster: it runs a control-plane
// server (Raft member, API server, controllers), a node agent, or a debugging
// client, depending on its subcommand.
package main

import (
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
