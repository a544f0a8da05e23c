package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/pods"
	"github.com/isle-cluster/isle/node/stream"
)

// connectRuntime connects to containerd, waiting for it while it starts
// (a board's containerd may come up after isle).
func (a *Agent) connectRuntime(ctx context.Context) (*containers.Runtime, error) {
	cfg := containers.Config{Address: a.cfg.Containerd, Namespace: a.cfg.ContainerdNamespace,
		FIFODir: filepath.Join(a.cfg.RunDir, "fifo"), RuncRoot: filepath.Join(a.cfg.RunDir, "runc"),
		Mirrors: a.cfg.RegistryMirrors, InsecureRegistries: a.cfg.InsecureRegistries, OpenLog: pods.OpenLog(0, 0), Logger: a.log}
	var rt *containers.Runtime
	err := retry(ctx, a.log, "connect to containerd", func(ctx context.Context) error {
		var err error
		rt, err = containers.Connect(ctx, cfg)
		return err
	})
	if err != nil || rt == nil {
		return nil, err // ctx ended
	}
	a.log.Info("agent: containerd connected", "address", a.cfg.Containerd, "version", rt.Version())
	return rt, nil
}

// startPods makes the pod manager of the board, and the informer of the
// Services it shares with Service traffic: it serves the streaming server
// and the usage reports.
func (a *Agent) startPods(rt *containers.Runtime) (*pods.Manager, error) {
	var network pods.Network = pods.LoopbackOnly{}
	if a.net != nil {
		network = a.net
	}
	var activity func()
	if a.cfg.LEDs != nil {
		activity = a.cfg.LEDs.Activity
	}
	a.services = cache.NewSharedIndexInformer(cache.NewListWatchFromClient(a.client, "services", "", fields.Everything()),
		&corev1.Service{}, 0, cache.Indexers{})
	if err := a.services.SetTransform(pods.WithoutManagedFields); err != nil {
		return nil, fmt.Errorf("agent: Service informer: %w", err)
	}
	m, err := pods.New(pods.Config{Network: network, Activity: activity, NodeName: a.cfg.Credential.Name, NodeIP: a.cfg.Address, Client: a.client,
		Services: a.services, Runtime: rt, DataDir: a.cfg.DataDir, RunDir: a.cfg.RunDir, Allocatable: a.report.status(time.Now()).Allocatable,
		Resync: a.cfg.PodResync, CgroupParent: a.cfg.CgroupParent, ResolvConf: a.cfg.ResolvConf,
		ClusterDNS: a.cfg.ClusterDNS, ClusterDomain: a.cfg.ClusterDomain, Logger: a.log, Unreachable: Unreachable})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.cfg.Stream = stream.NewHandler(m, pods.StreamRuntime(rt), a.log)
	a.cfg.PodStats = m
	return m, nil
}
