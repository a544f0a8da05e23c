package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
)

// Env is what a benchmark of the isle binary measured on.
type Env struct {
	Machine
	Isle string // first line of `isle version`
	Go   string // Go version the benchmark was built with
	Dir  string // temporary directory on a real disk, for the data
	Disk string // the disk that holds Dir
}

// Probe checks that the isle binary exists, reads its version and the
// machine's facts and, last, creates the temporary directory prefix* on a
// real disk.
func Probe(ctx context.Context, isle, prefix string) (Env, error) {
	env := Env{Machine: ReadMachine(), Go: runtime.Version()}
	if _, err := os.Stat(isle); err != nil {
		return env, fmt.Errorf("isle binary %s: %w: run make build", isle, err)
	}
	var err error
	if env.Isle, err = FirstLine(ctx, isle, "version"); err != nil {
		return env, err
	}
	env.Dir, env.Disk, err = DataDir(prefix)
	return env, err
}

// WriteMarkdown writes the environment as items of a markdown list.
func (e Env) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "- isle: %s\n", e.Isle)
	fmt.Fprintf(w, "- kernel %s, %d CPUs (%s), client built with %s\n", e.Kernel, e.CPUs, e.CPUModel, e.Go)
	fmt.Fprintf(w, "- data: %s on %s\n", e.Dir, e.Disk)
}
