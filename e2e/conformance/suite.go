package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// suite is upstream's conformance suite of one Kubernetes version, built
// from the Go module proxy in a cache directory outside the repository:
// a scratch module that requires k8s.io/kubernetes, with its own replace
// lines for the staging modules (Go ignores a dependency's replaces), from
// which e2e.test, the ginkgo CLI and the test images' Go programs
// (agnhost, nnp) are built.
type suite struct {
	version string // "v1.33.0"
	dir     string // CACHE/v1.33.0
	log     *slog.Logger
	// kubeDir is k8s.io/kubernetes's module directory, once the module
	// is made.
	kubeDir string
}

// goMain is the scratch module's one package: it only imports the suite,
// so that `go mod tidy` records every module the builds need.
const goMain = `// Package conformance is a scratch module of isle's make conformance:
// it builds upstream's e2e suite and test images; nothing here is isle's.
package conformance

import _ "k8s.io/kubernetes/test/e2e"
`

// goTools names the main packages built from the scratch module.
const goTools = `//go:build tools

package conformance

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
`

// stagingReplace matches k8s.io/kubernetes's replace lines of its staging
// modules: "k8s.io/api => ./staging/src/k8s.io/api".
var stagingReplace = regexp.MustCompile(`(?m)^\s*(k8s\.io/[a-z0-9-]+)\s+=>\s+\./staging/src/k8s\.io/[a-z0-9-]+\s*$`)

// stagingVersion is the staging modules' version of a Kubernetes release:
// v1.33.0 → v0.33.0.
func stagingVersion(v string) (string, error) {
	m := regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`).FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("suite: version %q: want a Kubernetes release such as v1.33.0", v)
	}
	return "v0." + m[1] + "." + m[2], nil
}

// goMod is the scratch module's go.mod for Kubernetes version v, whose own
// go.mod is kubeMod.
func goMod(v string, kubeMod []byte) (string, error) {
	sv, err := stagingVersion(v)
	if err != nil {
		return "", err
	}
	var mods []string
	for _, m := range stagingReplace.FindAllStringSubmatch(string(kubeMod), -1) {
		mods = append(mods, m[1])
	}
	if len(mods) == 0 {
		return "", fmt.Errorf("suite: k8s.io/kubernetes %s's go.mod has no replace lines of staging modules", v)
	}
	slices.Sort(mods)
	var b strings.Builder
	fmt.Fprintf(&b, "module isle.local/conformance\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", v)
	for _, m := range slices.Compact(mods) {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, sv)
	}
	b.WriteString(")\n")
	return b.String(), nil
}

func (s *suite) src() string { return filepath.Join(s.dir, "src") }

// env is the environment of the go commands: the cache's own temporary
// directory on the real disk (a small /tmp fails the build), no cgo, no
// flags of isle's Makefile.
func (s *suite) env(goarch string) []string {
	env := slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "GOFLAGS=") || strings.HasPrefix(e, "GOARCH=") || strings.HasPrefix(e, "GOARM=") ||
			strings.HasPrefix(e, "CGO_ENABLED=") || strings.HasPrefix(e, "GOTMPDIR=")
	})
	env = append(env, "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "GOTMPDIR="+filepath.Join(s.dir, "tmp"))
	if goarch != "" {
		goarch, arm, _ := strings.Cut(goarch, "/v")
		env = append(env, "GOARCH="+goarch)
		if arm != "" {
			env = append(env, "GOARM="+arm)
		}
	}
	return env
}

func (s *suite) goCmd(ctx context.Context, goarch string, args ...string) error {
	began := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = s.src(), s.env(goarch)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("suite: go %s: %w\n%s", strings.Join(args, " "), err, tail(out, 40))
	}
	s.log.Info("suite: go "+args[0], "args", strings.Join(args[1:], " "), "took", time.Since(began).Round(time.Second))
	return nil
}

// module writes the scratch module, unless it is there already.
func (s *suite) module(ctx context.Context) error {
	for _, d := range []string{s.src(), filepath.Join(s.dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("suite: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+s.version)
	cmd.Dir, cmd.Env = s.dir, s.env("")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("suite: go mod download k8s.io/kubernetes@%s: %w", s.version, err)
	}
	var dl struct{ Dir, GoMod, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Error != "" {
		return fmt.Errorf("suite: go mod download k8s.io/kubernetes@%s: %v %s", s.version, err, dl.Error)
	}
	s.kubeDir = dl.Dir
	kubeMod, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return fmt.Errorf("suite: %w", err)
	}
	mod, err := goMod(s.version, kubeMod)
	if err != nil {
		return err
	}
	files := map[string]string{"go.mod": mod, "e2e.go": goMain, "tools.go": goTools}
	changed := false
	for name, content := range files {
		p := filepath.Join(s.src(), name)
		if old, err := os.ReadFile(p); err == nil && (string(old) == content || name == "go.mod" && sameRequirement(old, content)) {
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("suite: %w", err)
		}
		changed = true
	}
	if _, err := os.Stat(filepath.Join(s.src(), "go.sum")); err == nil && !changed {
		return nil
	}
	return s.goCmd(ctx, "", "mod", "tidy")
}

// sameRequirement reports whether a tidied go.mod still has the replace
// block generated as want (tidy adds the indirect requirements).
func sameRequirement(tidied []byte, want string) bool {
	_, block, ok := strings.Cut(want, "replace (")
	return ok && strings.Contains(string(tidied), block) && strings.Contains(string(tidied), "require k8s.io/kubernetes ")
}

// build builds pkg of the scratch module for goarch ("amd64", "arm64",
// "arm/v7") into the cache as name, unless it is there; it returns its
// path. test builds a test binary (go test -c).
func (s *suite) build(ctx context.Context, goarch, pkg, name string, test bool) (string, error) {
	out := filepath.Join(s.dir, strings.ReplaceAll(goarch, "/", "")+"-"+name)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("suite: %w", err)
	}
	tmp := out + ".building"
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", tmp, pkg}
	if test {
		args = []string{"test", "-c", "-vet=off", "-trimpath", "-ldflags=-s -w", "-o", tmp, pkg}
	}
	s.log.Info("suite: building "+name+" (e2e.test takes about 6 minutes warm, longer the first time)", "arch", goarch)
	if err := s.goCmd(ctx, goarch, args...); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("suite: %w", err)
	}
	return out, nil
}

// tools are the suite's binaries for one run.
type tools struct {
	e2eTest, ginkgo string // for this machine
	agnhost, nnp    string // for the boards' architecture
}

// prepare makes the scratch module and builds what a run needs.
func (s *suite) prepare(ctx context.Context, arch string) (tools, error) {
	var t tools
	if err := s.module(ctx); err != nil {
		return t, err
	}
	var err error
	steps := []struct {
		dst       *string
		arch, pkg string
		name      string
		test      bool
	}{
		{&t.ginkgo, hostArch(), "github.com/onsi/ginkgo/v2/ginkgo", "ginkgo", false},
		{&t.agnhost, arch, "k8s.io/kubernetes/test/images/agnhost", "agnhost", false},
		{&t.nnp, arch, "k8s.io/kubernetes/test/images/nonewprivs", "nnp", false},
		{&t.e2eTest, hostArch(), "k8s.io/kubernetes/test/e2e", "e2e.test", true},
	}
	for _, st := range steps {
		if *st.dst, err = s.build(ctx, st.arch, st.pkg, st.name, st.test); err != nil {
			return t, err
		}
	}
	return t, nil
}

// tail is the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
