package main

import (
	"context"
	"runtime"

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
	goVersion   string
}

// probeEnvironment reads versions and machine facts and, last, creates the
// temporary directory on a real disk.
func probeEnvironment(ctx context.Context, isle string) (environment, error) {
	m := benchkit.ReadMachine()
	env := environment{kernel: m.Kernel, cpus: m.CPUs, cpuModel: m.CPUModel, goVersion: runtime.Version()}
	var err error
	if env.isleVersion, err = benchkit.FirstLine(ctx, isle, "version"); err != nil {
		return env, err
	}
	env.tempDir, env.disk, err = benchkit.DataDir("isle-schedbench-")
	return env, err
}
