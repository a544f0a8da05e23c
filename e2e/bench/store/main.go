// Command storebench compares isle's replicated store with etcd on one
// machine: three isle members and three etcd members run as real processes
// on loopback, each with its own data directory on the disk that holds the
// temporary directory, and both are driven by the same HTTP/1.1 client.
//
// For each writer count it measures writes/s, p50 and p99 latency and the
// bytes the three processes wrote to disk per acknowledged write (from
// /proc/PID/io), isle and etcd cells interleaved; then it measures what each
// idle cluster writes per second. It prints markdown tables to stdout and
// progress to stderr. `make bench-store` runs it:
//
//	go run ./e2e/bench/store -isle out/isle [-duration 10s] [-idle 60s] [-writers 1,16,64]
//
// It is a benchmark, not a test: it fails only when it cannot measure.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// options are the command-line flags.
type options struct {
	benchkit.Flags
	etcd      string
	duration  time.Duration
	warmup    time.Duration
	idle      time.Duration
	writers   []int
	valueSize int
}

func parseFlags(args []string) (options, error) {
	var o options
	var writers string
	fs := o.NewFlagSet("storebench")
	fs.StringVar(&o.etcd, "etcd", "/usr/bin/etcd", "path of the etcd binary (Debian's etcd-server)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each cell")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each cell")
	fs.DurationVar(&o.idle, "idle", 60*time.Second, "how long to measure the idle clusters' disk writes")
	fs.StringVar(&writers, "writers", "1,16,64", "comma-separated numbers of concurrent writers")
	fs.IntVar(&o.valueSize, "value-size", 1024, "bytes per value")
	if err := o.Parse(fs, args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(writers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("flags: -writers %q: want positive integers separated by commas", writers)
		}
		o.writers = append(o.writers, n)
	}
	if o.duration <= 0 || o.idle <= 0 || o.warmup < 0 {
		return o, errors.New("flags: -duration and -idle must be positive, -warmup not negative")
	}
	if o.valueSize < 1 || o.valueSize > 1<<20 {
		return o, fmt.Errorf("flags: -value-size %d: want 1 to %d bytes", o.valueSize, 1<<20)
	}
	return o, nil
}

func main() { benchkit.Main("storebench", parseFlags, run) }

// run sets everything up, measures, prints, and always tears down.
func run(ctx context.Context, o options) (err error) {
	env, err := probeEnvironment(ctx, o)
	if err != nil {
		return err
	}
	ws := newWorkspace(env.Dir)
	defer func() {
		if ctx.Err() != nil {
			err = errors.New("interrupted: stopped every member")
		}
		// Member logs help only when something broke, not after Ctrl-C.
		ws.teardown(err != nil && ctx.Err() == nil, o.Keep)
	}()

	ports, err := benchkit.FreePorts(18)
	if err != nil {
		return err
	}
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()

	slog.Info("starting isle members", "dir", env.Dir)
	isle, err := startIsle(ctx, ws, o.Isle, ports[:12], hc)
	if err != nil {
		return err
	}
	slog.Info("starting etcd members")
	etcd, err := startEtcd(ctx, ws, o.etcd, ports[12:], hc)
	if err != nil {
		return err
	}

	value := make([]byte, o.valueSize)
	fillValue(value)
	var cells []cellResult
	for _, w := range o.writers {
		for _, c := range []cluster{isle, etcd} {
			r, err := measureCell(ctx, c, w, o, value)
			if err != nil {
				return err
			}
			cells = append(cells, r)
		}
	}
	idle, err := measureIdle(ctx, []cluster{isle, etcd}, o.idle)
	if err != nil {
		return err
	}
	printReport(os.Stdout, env, o, cells, idle)
	return nil
}
