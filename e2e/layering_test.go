package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/isle-cluster/isle/"

// layeringRules are the dependency rules of ARCHITECTURE.md, as the tree's
// own imports must keep them: from, the packages a rule is about (a tree
// prefix), and may, whether one of them may import a given package of the
// project (a path below the module).
var layeringRules = []struct {
	name string
	from string
	may  func(to string) bool
}{
	{"raft/ imports nothing of the project", "raft", func(to string) bool { return under(to, "raft") }},
	{"control/ never imports node/", "control", func(to string) bool { return !under(to, "node") }},
	{"node/ imports of control/ are its wire package alone", "node", func(to string) bool {
		return !under(to, "control") || under(to, "control/wire")
	}},
	{"hw/ imports neither control/ nor node/", "hw", func(to string) bool { return !under(to, "control") && !under(to, "node") }},
}

// assembly are the packages that assemble a board (cmd/isle turns flags
// into its board.Config): of the product (e2e/, the whole-binary tests and
// their harnesses, may assemble anything), they alone import both control/,
// beyond the wire package node/ shares, and node/.
var assembly = []string{"cmd/isle", "cmd/isle/board"}

func under(pkg, tree string) bool { return pkg == tree || strings.HasPrefix(pkg, tree+"/") }

// TestLayering reads every package's imports (tests' left out: a test may
// assemble what the product keeps apart) with go list and checks the rules.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	packages := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		packages++
		var control, node string
		for _, imp := range fields[1:] {
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			for _, r := range layeringRules {
				if under(from, r.from) && !r.may(to) {
					t.Errorf("%s imports %s: %s", from, to, r.name)
				}
			}
			switch {
			case under(to, "control") && !under(to, "control/wire"):
				control = to
			case under(to, "node"):
				node = to
			}
		}
		if control != "" && node != "" && !under(from, "e2e") && !slices.Contains(assembly, from) {
			t.Errorf("%s imports %s and %s: only the board's assembly (%s) joins control/ and node/", from, control, node, strings.Join(assembly, ", "))
		}
	}
	if packages < 50 {
		t.Fatalf("go list found %d packages of the module: not the whole tree", packages)
	}
}
