// Package firstboot configures a board flashed from an isle image, once, at
// its first boot, from isle.yaml on the card's FAT partition
// (/boot/firmware), which the user writes before the first power-on (the
// image ships Example beside it as isle.yaml.example).
//
// The contract, as `isle firstboot` runs it:
//
//	if IsDone(root) { stop }           // ROOT/var/lib/isle/firstboot.done
//	c := Parse(BOOT/isle.yaml)         // every key checked; errors name file:line and key
//	c.Role = the image's role, if isle.yaml gave none
//	Apply(root, c, board)              // the board's files, each written atomically
//	RemoveToken(BOOT/isle.yaml, c)     // the token off the FAT partition
//	MarkDone(root)
//
// Apply writes under root:
//
//   - etc/isle/config.yaml (mode 0600), read by isle server and isle agent:
//     token, join, init, name, address (auto for DHCP), the LED settings and
//     the settings of isle.yaml's isle: map;
//   - etc/hostname and the 127.0.1.1 line of etc/hosts;
//   - etc/systemd/network/10-isle.network for systemd-networkd: DHCP or
//     the static address, gateway and DNS servers;
//   - root/.ssh/authorized_keys (mode 0600, in a directory of mode 0700)
//     with isle.yaml's ssh-authorized-keys, if it gives any;
//   - the link enabling isle-ROLE.service in
//     etc/systemd/system/multi-user.target.wants (the other role's link
//     removed).
//
// Nothing is written unless the whole Config is valid, and every file is
// written to a temporary name, synced, renamed and its directory synced: a
// board's card may lose power at any moment of its first boot.
package firstboot
