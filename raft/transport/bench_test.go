package transport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// flowHandler releases one credit per delivered message so the sender never
// overruns the queue (Send drops rather than blocks).
type flowHandler struct{ credits chan struct{} }

func (h *flowHandler) Process(context.Context, raftpb.Message) error {
	<-h.credits
	return nil
}
func (h *flowHandler) ReportUnreachable(uint64)                       {}
func (h *flowHandler) ReportSnapshot(uint64, etcdraft.SnapshotStatus) {}

// BenchmarkSendMsgApp1KiB measures loopback throughput of MsgApp messages
// carrying one 1 KiB entry, from one Transport to another, with perSend
// messages per Send call (a Ready batch).
func BenchmarkSendMsgApp1KiB(b *testing.B) {
	for _, perSend := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("perSend=%d", perSend), func(b *testing.B) {
			const window = 2048 // in flight; below the queue size, so nothing is dropped
			fh := &flowHandler{credits: make(chan struct{}, window)}
			quiet := func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) }
			src := newNode(b, 1, quiet)
			dst := newNode(b, 2, func(c *Config) { quiet(c); c.Handler = fh })
			src.AddPeer(2, dst.addr)
			waitConnected(b, src, 2)

			batch := make([]raftpb.Message, perSend)
			for i := range batch {
				batch[i] = appMsg(1, 2, uint64(i+1), 1024)
			}
			b.SetBytes(int64(batch[0].Size()))
			b.ReportAllocs()
			b.ResetTimer()
			for sent := 0; sent < b.N; sent += perSend {
				n := min(perSend, b.N-sent)
				for range n {
					fh.credits <- struct{}{} // blocks while `window` messages are in flight
				}
				src.Send(batch[:n])
			}
			for range window { // wait until every message was delivered
				fh.credits <- struct{}{}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			waitFor(b, "all %d messages counted as written", func() bool { return src.peer(2).frames.Load() == int64(b.N) }, b.N)
		})
	}
}
