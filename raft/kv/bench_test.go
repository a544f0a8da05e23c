package kv

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

func BenchmarkApply(b *testing.B) {
	value := make([]byte, 2048)
	b.Run("create-1KiB", func(b *testing.B) {
		s := New(quietOptions())
		v := value[:1024]
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if res := s.Apply(txn(uint64(i+1), Op{Type: OpPut, Key: fmt.Sprintf("/registry/pods/default/pod-%08d", i), Value: v, IfModRev: 0})); !res.Succeeded {
				b.Fatal(res)
			}
		}
	})
	for _, watchers := range []int{0, 10} {
		b.Run(fmt.Sprintf("update-300keys-2KiB-%dwatchers", watchers), func(b *testing.B) {
			s := New(quietOptions())
			const keys = 300
			mods := make([]int64, keys)
			names := make([]string, keys)
			for k := range names {
				names[k] = fmt.Sprintf("/registry/pods/default/pod-%04d", k)
				mods[k] = mustApply(b, s, put(names[k], string(value), 0)).Revision
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for w := 0; w < watchers; w++ {
				wt, err := s.Watch(ctx, "/registry/pods/", s.Revision())
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					for range wt.C() {
					}
				}()
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				k := i % keys
				res := s.Apply(txn(uint64(i+1), Op{Type: OpPut, Key: names[k], Value: value, IfModRev: mods[k]}))
				if !res.Succeeded {
					b.Fatal(res)
				}
				mods[k] = res.Revision
			}
		})
	}
	b.Run("txn-4ops", func(b *testing.B) {
		s := New(quietOptions())
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			res := s.Apply(txn(uint64(i+1),
				put(fmt.Sprintf("/a/%d", i%100), "v", -1), put(fmt.Sprintf("/b/%d", i%100), "v", -1),
				del(fmt.Sprintf("/c/%d", i%100), -1), put(fmt.Sprintf("/c/%d", i%100), "v", -1)))
			if !res.Succeeded {
				b.Fatal(res)
			}
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		s := New(quietOptions())
		data := txn(1, put("/k", string(value), -1))
		s.Apply(data)
		b.ReportAllocs()
		for b.Loop() {
			if res := s.Apply(data); !res.Duplicate {
				b.Fatal(res)
			}
		}
	})
}

func BenchmarkList300(b *testing.B) {
	s := New(quietOptions())
	value := make([]byte, 2048)
	for k := 0; k < 300; k++ {
		mustApply(b, s, Op{Type: OpPut, Key: fmt.Sprintf("/registry/pods/default/pod-%04d", k), Value: value, IfModRev: 0})
	}
	b.ReportAllocs()
	for b.Loop() {
		if kvs, _, _ := s.List("/registry/pods/", "", 0); len(kvs) != 300 {
			b.Fatal(len(kvs))
		}
	}
}

// BenchmarkMemory reports the heap a store needs for 300 pods of 3 KiB
// after 20000 updates with default options (history and dedup table full),
// and what the event history holds.
func BenchmarkMemory(b *testing.B) {
	const keys, valueSize, updates = 300, 3072, 20000
	for b.Loop() {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s := New(quietOptions())
		for i := 0; i < keys+updates; i++ {
			v := make([]byte, valueSize)
			s.Apply(txn(uint64(i+1), Op{Type: OpPut, Key: fmt.Sprintf("/registry/pods/default/pod-%04d", i%keys), Value: v, IfModRev: -1}))
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		s.mu.RLock()
		events, histBytes := s.hist.n, s.hist.bytes
		s.mu.RUnlock()
		b.ReportMetric((float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/(1<<20), "MiB-heap")
		b.ReportMetric(float64(events), "history-events")
		b.ReportMetric(float64(histBytes)/(1<<20), "MiB-history-kv")
		runtime.KeepAlive(s)
	}
}
