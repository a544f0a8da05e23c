package wal

import (
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// BenchmarkSave measures Save with 1 KiB entries, synced and not, single
// entries and batches. Segments are cut at the default size.
func BenchmarkSave(b *testing.B) {
	for _, bc := range []struct {
		batch int
		sync  bool
	}{
		{batch: 1, sync: true},
		{batch: 1, sync: false},
		{batch: 16, sync: true},
		{batch: 16, sync: false},
	} {
		b.Run(fmt.Sprintf("batch=%d/sync=%v", bc.batch, bc.sync), func(b *testing.B) {
			w, _ := mustOpen(b, b.TempDir(), Options{})
			defer w.Close()
			batch := ents(1, uint64(bc.batch), 1, 1024)
			b.SetBytes(int64(1024 * bc.batch))
			b.ReportAllocs()
			next := uint64(1)
			for b.Loop() {
				for i := range batch {
					batch[i].Index = next
					next++
				}
				if err := w.Save(raftpb.HardState{Term: 1, Vote: 1, Commit: next - 1}, batch, bc.sync); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
