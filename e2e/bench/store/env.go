package main

import (
	"context"
	"fmt"
	"os"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// environment is what the numbers were measured on.
type environment struct {
	benchkit.Env
	etcdVersion string // first line of `etcd --version`
}

// probeEnvironment checks both binaries, reads their versions and the
// machine's facts and, last, creates the temporary directory on a real
// disk.
func probeEnvironment(ctx context.Context, o options) (environment, error) {
	var env environment
	if _, err := os.Stat(o.etcd); err != nil {
		return env, fmt.Errorf("etcd binary %s: %w: run make setup (it installs Debian's etcd-server)", o.etcd, err)
	}
	var err error
	if env.etcdVersion, err = benchkit.FirstLine(ctx, o.etcd, "--version"); err != nil {
		return env, err
	}
	env.Env, err = benchkit.Probe(ctx, o.Isle, "isle-storebench-")
	return env, err
}
