// Package units holds isle's systemd units: isle-agent.service and
// isle-server.service run a board (with its settings in
// /etc/isle/config.yaml), and isle-firstboot.service applies a flashed
// board's isle.yaml at its first boot (its @ROLE@ is the image's role).
// The SD-card image builder installs them; on a board set up by hand, copy
// the role's unit to /etc/systemd/system.
package units

import "embed"

// Files are the unit files, by name.
//
//go:embed *.service
var Files embed.FS
