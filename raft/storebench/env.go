package main

import (
	"context"

	"github.com/isle-cluster/isle/raft/benchkit"
)

// environment is what the numbers were measured on.
type environment struct {
	tempDir     string
	kernel      string
	cpus        int
	cpuModel    string
	disk        string
	isleVersion string
	etcdVersion string
}

// probeEnvironment reads versions and machine facts and, last, creates the
// temporary directory on a real disk.
func probeEnvironment(ctx context.Context, o options) (environment, error) {
	var env environment
	var err error
	if env.isleVersion, err = benchkit.FirstLine(ctx, o.isle, "version"); err != nil {
		return env, err
	}
	if env.etcdVersion, err = benchkit.FirstLine(ctx, o.etcd, "--version"); err != nil {
		return env, err
	}
	m := benchkit.ReadMachine()
	env.kernel, env.cpus, env.cpuModel = m.Kernel, m.CPUs, m.CPUModel
	env.tempDir, env.disk, err = benchkit.DataDir("isle-storebench-")
	return env, err
}
