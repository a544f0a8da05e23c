// Command mapbench measures the island's map (/isle/map/, package
// control/islemap) in headless Chromium against one real `isle server`
// process on loopback, with its data directory on disk:
//
//   - the boards are simulated as API objects: -boards Nodes (Ready,
//     arm64, 4 CPUs and 8 GiB allocatable, the ready LED solid) and -pods
//     Pods spread over them, bound, Running and Ready through the status
//     subresource, in five Services (one behind an Ingress); there are no
//     agents;
//   - the map is served by `isle map` (the user's proxy) with the
//     administrator's kubeconfig and opened in a 1920×1080 window;
//   - update latency: -trials times, one pod's Ready condition is flipped
//     through the API, and the time from the request to the pod's bubble
//     changing class in the page (a MutationObserver) is taken;
//   - frame time while -burst (100) pods change at once:
//     requestAnimationFrame intervals and long tasks for 3 s from as many
//     concurrent flips, and the page's main-thread time and every
//     process's CPU time over them;
//   - the page's memory: its JavaScript heap (after a collection) and its
//     DOM nodes;
//   - the API server's added memory and CPU per open map: with no map,
//     then with -maps maps open, idle for -idle each, the server's RSS, Go
//     heap in use (after a collection) and CPU time, the difference
//     divided by the maps;
//   - the bytes of the page's files (control/islemap/web), as stored and
//     as served gzipped.
//
// It prints markdown tables and the targets to stdout and progress to
// stderr. `make bench-map` runs it:
//
//	go run ./e2e/bench/map -isle out/isle [-boards 50] [-pods 1000] [-trials 50] [-burst 100] [-maps 5] [-idle 30s] [-chromium PATH] [-cpuprofile FILE] [-keep]
//
// Nodes without a live board are marked NotReady (Unknown) by the node
// lifecycle controller once its grace period (40 s) has passed, and their
// Ready pods NotReady with them; the run waits for that before it makes
// its pods Ready, so the marking does not land in a measure, and the
// boards are drawn dark. Their pods tolerate it, so none is evicted.
//
// It is a benchmark, not a test: it fails only when it cannot measure.
package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// options are the command-line flags.
type options struct {
	benchkit.Flags
	boards     int
	pods       int
	trials     int
	burst      int
	maps       int
	idle       time.Duration
	writers    int
	chromium   string
	web        string
	cpuProfile string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := o.NewFlagSet("mapbench")
	fs.IntVar(&o.boards, "boards", 50, "boards (Nodes) to simulate")
	fs.IntVar(&o.pods, "pods", 1000, "Pods, spread over the boards")
	fs.IntVar(&o.trials, "trials", 50, "single-pod changes timed from the API to the page")
	fs.IntVar(&o.burst, "burst", 100, "pods changed at once while the frames are timed")
	fs.IntVar(&o.maps, "maps", 5, "maps open at once for the server's cost per map")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "idle time over which the server's CPU is read, without and with the maps")
	fs.IntVar(&o.writers, "writers", 16, "concurrent writers for the creates")
	fs.StringVar(&o.chromium, "chromium", "", "Chromium binary (default: chromium or chromium-browser on PATH)")
	fs.StringVar(&o.web, "web", "control/islemap/web", "the map's files, whose bytes are reported")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the page's CPU profile (Chrome DevTools' .cpuprofile JSON) over the burst to this file")
	if err := o.Parse(fs, args); err != nil {
		return o, err
	}
	if o.boards < 1 || o.pods < 1 || o.trials < 1 || o.burst < 1 || o.maps < 1 || o.writers < 1 {
		return o, errors.New("flags: -boards, -pods, -trials, -burst, -maps and -writers must be positive")
	}
	if o.trials+o.burst > o.pods {
		return o, errors.New("flags: -trials and -burst pick distinct pods: their sum must not exceed -pods")
	}
	if o.idle < 5*time.Second {
		return o, errors.New("flags: -idle must be at least 5s")
	}
	if o.pods > o.boards*podsPerNode {
		return o, errors.New("flags: more pods than the boards hold (110 each)")
	}
	if o.chromium == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				o.chromium = p
				break
			}
		}
		if o.chromium == "" {
			return o, errors.New("flags: no chromium on PATH (apt-get install chromium, or -chromium PATH)")
		}
	}
	if _, err := os.Stat(o.web); err != nil {
		return o, errors.New("flags: -web " + o.web + ": " + err.Error() + " (run from the repository's root)")
	}
	return o, nil
}

func main() { benchkit.Main("mapbench", parseFlags, run) }

// run runs the benchmark on one server and prints the report.
func run(ctx context.Context, o options) error {
	srv := &isleserver.Server{}
	return srv.Run(ctx, o.Flags, "isle-mapbench-", func(ctx context.Context, env benchkit.Env) error {
		res, err := measure(ctx, srv, env, o)
		if err != nil {
			return err
		}
		printReport(os.Stdout, env, o, res)
		return nil
	})
}
