package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// binfmtDir is where the kernel's binfmt_misc filesystem is mounted.
const binfmtDir = "/proc/sys/fs/binfmt_misc"

// qemuArch is the name qemu-user gives a Debian architecture.
var qemuArch = map[string]string{"arm64": "aarch64", "armhf": "arm", "armel": "arm"}

// EnsureBinfmt makes the kernel run arch's programs through qemu-user, as
// mmdebstrap needs to run a foreign root's maintainer scripts: it mounts
// binfmt_misc if it is not, and registers qemu-user-static's entry for
// arch (/usr/lib/binfmt.d/qemu-ARCH.conf, with the F flag, so it works in
// a chroot) if it is missing. Needs root. It does nothing for the
// machine's own architecture.
func EnsureBinfmt(arch string) error {
	name, ok := qemuArch[arch]
	if !ok {
		return fmt.Errorf("rootfs: architecture %q: want arm64, armhf or armel", arch)
	}
	if _, err := os.Stat(filepath.Join(binfmtDir, "register")); errors.Is(err, fs.ErrNotExist) {
		if err := syscall.Mount("binfmt_misc", binfmtDir, "binfmt_misc", 0, ""); err != nil {
			return fmt.Errorf("rootfs: mount binfmt_misc on %s (as root?): %w", binfmtDir, err)
		}
	}
	entry := filepath.Join(binfmtDir, "qemu-"+name)
	if b, err := os.ReadFile(entry); err == nil {
		if !strings.HasPrefix(string(b), "enabled") {
			return fmt.Errorf("rootfs: %s is disabled: echo 1 > %s", entry, entry)
		}
		return nil
	}
	conf := "/usr/lib/binfmt.d/qemu-" + name + ".conf"
	rule, err := os.ReadFile(conf)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rootfs: %s not found: apt-get install qemu-user-static", conf)
	}
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(binfmtDir, "register"), []byte(strings.TrimSpace(string(rule))), 0); err != nil {
		return fmt.Errorf("rootfs: register %s with binfmt_misc: %w", conf, err)
	}
	return nil
}
