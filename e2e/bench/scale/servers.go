package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
	"github.com/isle-cluster/isle/raft/storeapi"
)

// server is one of the three `isle server` processes, each on its own
// loopback address with the standard ports, running no pods (the control
// plane alone is measured; the hollow boards are the nodes).
type server struct {
	name, addr, dir string
	args            []string
	p               *benchkit.Proc // nil once killed
	store           *storeapi.Client
	client          kubernetes.Interface // the administrator, through this server
}

func (s *server) api() string         { return s.addr + ":6443" }
func (s *server) gossip() string      { return s.addr + ":7946" }
func (s *server) adminSocket() string { return filepath.Join(s.dir, "admin.sock") }

// serverAddr is the loopback address of server i (0-based).
func serverAddr(i int) string { return fmt.Sprintf("127.0.2.%d", i+1) }

// startServers starts the first server with --init and the two others
// joining it, and waits for three voters with a leader.
func startServers(ctx context.Context, bin, base string) ([]*server, error) {
	var out []*server
	for i := range 3 {
		s := &server{name: fmt.Sprintf("s%d", i+1), addr: serverAddr(i), dir: filepath.Join(base, fmt.Sprintf("s%d", i+1))}
		s.args = []string{"server", "--name", s.name, "--address", s.addr, "--data-dir", s.dir,
			"--containerd", "none", "--run-dir", filepath.Join(s.dir, "run"), "--config", "", "--mdns=false",
			"--ingress-http", "none", "--metrics-addr", s.addr + ":10249", "--admin-socket", s.adminSocket(), "--debug"}
		if i == 0 {
			s.args = append(s.args, "--init")
		} else {
			tok, err := os.ReadFile(filepath.Join(out[0].dir, "token"))
			if err != nil {
				return out, fmt.Errorf("start %s: read s1's token: %w", s.name, err)
			}
			s.args = append(s.args, "--join", out[0].addr, "--token", strings.TrimSpace(string(tok)))
		}
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return out, fmt.Errorf("start %s: %w", s.name, err)
		}
		var err error
		if s.p, err = benchkit.StartProc(s.name, filepath.Join(base, s.name+".log"), bin, s.args...); err != nil {
			return out, err
		}
		out = append(out, s)
		s.store = storeapi.NewClient(s.adminSocket(), &http.Client{Transport: storeapi.UnixTransport(s.adminSocket())})
		err = benchkit.WaitFor(ctx, 60*time.Second, s.name+"'s store", []*benchkit.Proc{s.p}, func(ctx context.Context) error {
			_, err := s.store.Status(ctx)
			return err
		})
		if err != nil {
			return out, err
		}
	}
	err := benchkit.WaitFor(ctx, 60*time.Second, "3 voters and a leader", procsOf(out), func(ctx context.Context) error {
		for _, s := range out {
			st, err := s.store.Status(ctx)
			switch {
			case err != nil:
				return err
			case len(st.Members) != 3:
				return fmt.Errorf("%s sees %d members", s.name, len(st.Members))
			case st.Leader == 0:
				return errors.New(s.name + " sees no leader")
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	for _, s := range out {
		cfg, err := isleserver.RESTConfig(ctx, bin, out[0].dir, "https://"+s.api())
		if err != nil {
			return out, err
		}
		cfg.QPS, cfg.Burst = -1, 0 // the bench's own pace; no client-side limit
		if s.client, err = kubernetes.NewForConfig(cfg); err != nil {
			return out, fmt.Errorf("client of %s: %w", s.name, err)
		}
	}
	slog.Info("servers ready", "addresses", []string{out[0].addr, out[1].addr, out[2].addr})
	return out, nil
}

func procsOf(ss []*server) []*benchkit.Proc {
	var ps []*benchkit.Proc
	for _, s := range ss {
		if s.p != nil {
			ps = append(ps, s.p)
		}
	}
	return ps
}

// leader returns the server that leads the store, as the first live one
// sees it.
func leader(ctx context.Context, ss []*server) (*server, error) {
	for _, s := range ss {
		if s.p == nil {
			continue
		}
		st, err := s.store.Status(ctx)
		if err != nil {
			continue
		}
		for _, m := range st.Members {
			if m.ID == st.Leader {
				for _, c := range ss {
					if c.name == m.Name {
						return c, nil
					}
				}
			}
		}
	}
	return nil, errors.New("no server knows a leader")
}

// serverSample is what the report says of one server at one moment.
type serverSample struct {
	rss, live  uint64
	anon, file uint64        // RSS split: the process's own pages, the binary's
	cpu        time.Duration // CPU time used so far
	written    uint64        // write_bytes so far
	storeBytes int64         // the data directory on disk
	logBytes   uint64        // raft entries held in memory
}

func (s *server) sample(ctx context.Context) (serverSample, error) {
	var out serverSample
	var err error
	if out.rss, _, err = s.p.Memory(); err != nil {
		return out, err
	}
	if out.anon, out.file, err = s.p.MemorySplit(); err != nil {
		return out, err
	}
	if out.cpu, err = s.p.CPUTime(); err != nil {
		return out, err
	}
	if out.written, err = s.p.WriteBytes(); err != nil {
		return out, err
	}
	out.live = isleserver.LiveHeap(ctx, s.adminSocket())
	if st, err := s.store.Status(ctx); err == nil {
		out.logBytes = st.LogBytes
	}
	out.storeBytes = dirBytes(s.dir, filepath.Join(s.dir, "run"))
	return out, nil
}

// dirBytes is the size of the files under dir but not under skip.
func dirBytes(dir, skip string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && path == skip {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}
