package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
)

// PodStats gives the usage of the pods running on this board, averaged
// since the previous call. The container runtime knows it; until the agent
// runs containers (the containerd part of the agent), NoPodStats stands in
// and the agent reports its board's usage with no pods.
type PodStats interface {
	PodUsage(ctx context.Context) ([]wire.PodUsage, error)
}

// NoPodStats reports no pods: this board runs none yet.
type NoPodStats struct{}

// PodUsage returns nothing.
func (NoPodStats) PodUsage(context.Context) ([]wire.PodUsage, error) { return nil, nil }

// statsPusher reports the board's usage and its pods' to every alive
// server every interval (package metrics has the protocol). Nothing is
// stored: each server keeps the latest reports in memory.
type statsPusher struct {
	node  string
	token string
	// servers are the API addresses (host:port) to report to.
	servers func() []string
	client  *http.Client
	pods    PodStats
	log     *slog.Logger

	readCPU    func() (hw.CPUTimes, error)
	readMemory func() (int64, error)
	now        func() time.Time

	mu      sync.Mutex
	lastErr map[string]string // by server: what was last logged
}

func newStatsPusher(cred wire.Credential, servers *servers, pods PodStats, log *slog.Logger) (*statsPusher, error) {
	tr := &http.Transport{TLSClientConfig: servers.tlsConfig(), MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * wire.ReportInterval}
	if pods == nil {
		pods = NoPodStats{}
	}
	now := servers.now
	if now == nil {
		now = time.Now
	}
	return &statsPusher{node: cred.Name, token: cred.NodeToken, servers: servers.candidates,
		client: &http.Client{Transport: tr, Timeout: 5 * time.Second}, pods: pods, log: log,
		readCPU: hw.ReadCPUTimes, readMemory: hw.ReadMemoryWorkingSet, now: now, lastErr: map[string]string{}}, nil
}

// run reports every interval until ctx ends. The first report comes one
// interval after the start: CPU usage is a difference of two readings.
func (p *statsPusher) run(ctx context.Context, interval time.Duration) {
	prev, err := p.readCPU()
	prevAt := p.now()
	if err != nil {
		p.log.Error("agent: usage not reported: cannot read CPU times", "err", err)
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := p.readCPU()
		at := p.now()
		if err != nil {
			p.log.Warn("agent: usage not reported: cannot read CPU times", "err", err)
			continue
		}
		cores, ok := cur.CoresSince(prev)
		window := at.Sub(prevAt).Round(time.Millisecond)
		prev, prevAt = cur, at
		if !ok {
			continue
		}
		body, err := p.report(ctx, at, window, cores)
		if err != nil {
			p.log.Warn("agent: usage not reported", "err", err)
			continue
		}
		p.send(ctx, body)
	}
}

// report builds the report of the window ending at.
func (p *statsPusher) report(ctx context.Context, at time.Time, window time.Duration, cores float64) ([]byte, error) {
	mem, err := p.readMemory()
	if err != nil {
		return nil, err
	}
	pods, err := p.pods.PodUsage(ctx)
	if err != nil {
		return nil, fmt.Errorf("pod usage: %w", err)
	}
	r := wire.Report{
		Timestamp: metav1.NewTime(at), Window: metav1.Duration{Duration: window},
		Node: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(cores*1e9), resource.Nano),
			corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		},
		Pods: pods,
	}
	return json.Marshal(r)
}

// send posts a report to every server at once and waits for them.
func (p *statsPusher) send(ctx context.Context, body []byte) {
	var wg sync.WaitGroup
	for _, addr := range p.servers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.post(ctx, addr, body)
			if ctx.Err() != nil {
				return // the agent is stopping: not the server's fault
			}
			p.logOutcome(addr, err)
		}()
	}
	wg.Wait()
}

func (p *statsPusher) post(ctx context.Context, addr string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+wire.ReportPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("User-Agent", "isle-agent/"+p.node)
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		var st metav1.Status
		if json.Unmarshal(msg, &st) == nil && st.Message != "" {
			return fmt.Errorf("%s: %s", resp.Status, st.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// logOutcome logs a server's refusal or unreachability once, not every
// interval, and its recovery.
func (p *statsPusher) logOutcome(addr string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	p.mu.Lock()
	last := p.lastErr[addr]
	p.lastErr[addr] = msg
	p.mu.Unlock()
	switch {
	case msg == last:
	case err != nil:
		p.log.Warn("agent: a server did not take the usage report", "server", addr, "err", err)
	default:
		p.log.Info("agent: a server takes usage reports again", "server", addr)
	}
}
