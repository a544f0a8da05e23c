package island

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/google/nftables"

	"github.com/isle-cluster/isle/hw"
)

// ErrPrerequisites is returned when the machine lacks what an island
// needs; the error has one line per missing thing, each with its fix.
var ErrPrerequisites = errors.New("this machine cannot run an island")

// checkMachine checks what an island needs of the machine: root, the
// programs it starts, nftables and the memory cgroup.
func checkMachine() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "not root: an island makes network namespaces, links and mounts; run it as root (sudo isle up)")
	}
	for _, p := range []struct{ bin, pkg string }{
		{"containerd", "containerd"}, {"runc", "runc"}, {"docker-registry", "docker-registry"},
	} {
		if _, err := exec.LookPath(p.bin); err != nil {
			missing = append(missing, fmt.Sprintf("no %s in PATH: apt-get install %s", p.bin, p.pkg))
		}
	}
	if os.Geteuid() == 0 {
		if err := checkNftables(); err != nil {
			missing = append(missing, fmt.Sprintf("no nftables in the kernel (%v): use a kernel with nf_tables and NAT (CONFIG_NF_TABLES, CONFIG_NFT_NAT, CONFIG_NFT_MASQ)", err))
		}
	}
	if err := hw.CheckMemoryCgroup("/"); err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w:\n  %s", ErrPrerequisites, strings.Join(missing, "\n  "))
	}
	return nil
}

// checkNftables asks the kernel for its nftables tables.
func checkNftables() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	_, err = c.ListTables()
	return err
}
