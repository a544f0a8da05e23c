package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/raft/storeapi"
)

// isleCluster is three `isle server` processes on loopback.
type isleCluster struct {
	members []*isleMember
}

type isleMember struct {
	name        string
	metricsAddr string // /metrics (the store address of older binaries)
	api         string // the store API: the admin socket, or that store address
	p           *benchkit.Proc
	c           *storeapi.Client
}

func (c *isleCluster) system() string { return "isle" }

func (c *isleCluster) procs() []*benchkit.Proc {
	var ps []*benchkit.Proc
	for _, m := range c.members {
		ps = append(ps, m.p)
	}
	return ps
}

func (c *isleCluster) put(ctx context.Context, i int, key string, value []byte) error {
	_, err := c.members[i].c.Put(ctx, key, value, -1)
	return err
}

func (c *isleCluster) metricsURLs() []string {
	var us []string
	for _, m := range c.members {
		us = append(us, "http://"+m.metricsAddr+"/metrics")
	}
	return us
}

func (c *isleCluster) fsyncMetric() string { return "isle_raft_wal_sync_seconds" }

// snapshotBytesMetric is missing from older binaries (then "-" is printed).
func (c *isleCluster) snapshotBytesMetric() string { return "isle_raft_snapshot_file_bytes_total" }

// startIsle starts b1 with --init, then b2 and b3 joining it, and waits
// until all three are voters with a leader. ports: three metrics (store
// addresses of older binaries), three raft, three API, three gossip.
func startIsle(ctx context.Context, ws *workspace, bin string, ports []int, hc *http.Client) (*isleCluster, error) {
	c := &isleCluster{}
	// A board that gossips joins through gossip, on a port of its own so
	// that the three members (and a demo on the machine) do not collide;
	// older binaries, benchmarked for comparison, join through the API.
	help, _ := exec.CommandContext(ctx, bin, "server", "--help").CombinedOutput()
	gossip := bytes.Contains(help, []byte("--gossip-port"))
	joinAddr := "127.0.0.1:" + strconv.Itoa(ports[6])
	if gossip {
		joinAddr = "127.0.0.1:" + strconv.Itoa(ports[9])
	}
	for i := range 3 {
		name := "b" + strconv.Itoa(i+1)
		dir := filepath.Join(ws.dir, "isle-"+name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("start isle %s: %w", name, err)
		}
		m := &isleMember{name: name, metricsAddr: "127.0.0.1:" + strconv.Itoa(ports[i])}
		args := []string{"server", "--name", name, "--data-dir", dir, "--address", "127.0.0.1",
			"--raft-port", strconv.Itoa(ports[3+i]), "--api-port", strconv.Itoa(ports[6+i])}
		// The writes go through the store API: on the admin socket with
		// --debug; older binaries serve it and /metrics on --store-addr.
		if bytes.Contains(help, []byte("--admin-socket")) {
			m.api = filepath.Join(dir, "admin.sock")
			args = append(args, "--admin-socket", m.api, "--debug", "--metrics-addr", m.metricsAddr)
		} else {
			m.api = m.metricsAddr
			args = append(args, "--store-addr", m.metricsAddr)
		}
		if gossip {
			args = append(args, "--gossip-port", strconv.Itoa(ports[9+i]))
		}
		if bytes.Contains(help, []byte("--containerd")) {
			args = append(args, "--containerd", "none") // the store alone is measured
		}
		if i == 0 {
			args = append(args, "--init")
		} else {
			tok, err := os.ReadFile(filepath.Join(ws.dir, "isle-b1", "token"))
			if err != nil {
				return nil, fmt.Errorf("start isle %s: read b1's token: %w", name, err)
			}
			args = append(args, "--join", joinAddr, "--token", strings.TrimSpace(string(tok)))
		}
		p, err := ws.start("isle-"+name, nil, bin, args...)
		if err != nil {
			return nil, fmt.Errorf("start isle: %w", err)
		}
		own := *hc // a transport of its own for a socket
		m.p, m.c = p, storeapi.NewClient(m.api, &own)
		c.members = append(c.members, m)
		err = benchkit.WaitFor(ctx, 30*time.Second, "isle "+name+" to answer", []*benchkit.Proc{p}, func(ctx context.Context) error {
			_, err := m.c.Status(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("start isle: %w", err)
		}
	}
	err := benchkit.WaitFor(ctx, 60*time.Second, "isle: 3 voters and a leader", c.procs(), c.ready)
	if err != nil {
		return nil, fmt.Errorf("start isle: %w", err)
	}
	slog.Info("isle ready", "store", c.members[0].api+" "+c.members[1].api+" "+c.members[2].api)
	return c, nil
}

// ready holds when every member sees three voters, no learners, and a leader.
func (c *isleCluster) ready(ctx context.Context) error {
	for _, m := range c.members {
		st, err := m.c.Status(ctx)
		if err != nil {
			return err
		}
		if len(st.Members) != 3 {
			return fmt.Errorf("%s sees %d members", m.name, len(st.Members))
		}
		for _, mm := range st.Members {
			if mm.Learner {
				return fmt.Errorf("%s sees %s still a learner", m.name, mm.Name)
			}
		}
		if st.Leader == 0 {
			return errors.New(m.name + " sees no leader")
		}
	}
	return nil
}
