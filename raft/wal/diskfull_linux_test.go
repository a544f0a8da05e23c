package wal

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// requireRoot skips (developer machine) or fails (CI) a test that needs root.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "" {
		t.Skipf("needs root: %s", why)
	}
	t.Fatalf("needs root: %s (CI must run as root)", why)
}

// mountTmpfs mounts a tmpfs of the given size on a new temporary directory
// and unmounts it at the end of the test.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	requireRoot(t, "mounts a small tmpfs to fill it")
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", mnt, err)
	}
	// Registered after TempDir's cleanup, so it runs before the removal.
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// TestDiskFull fills a 256 KiB tmpfs: Save must fail with an error wrapping
// ENOSPC, the WAL must refuse further writes, and reopening must recover
// every entry whose synced Save returned nil.
func TestDiskFull(t *testing.T) {
	tests := []struct {
		name        string
		segmentSize int64
		dataSize    int
		perSave     int
	}{
		{name: "one segment", segmentSize: 0, dataSize: 1024, perSave: 1},
		{name: "many segments", segmentSize: 32 << 10, dataSize: 1024, perSave: 1},
		{name: "large batches", segmentSize: 64 << 10, dataSize: 3000, perSave: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(mountTmpfs(t, "256k"), "wal")
			opts := Options{SegmentSize: tc.segmentSize}
			w, _ := mustOpen(t, dir, opts)
			var acked []raftpb.Entry
			var ackedHS raftpb.HardState
			var saveErr error
			for next := uint64(1); saveErr == nil; next += uint64(tc.perSave) {
				if next > 100000 {
					t.Fatal("wrote 100000 entries to a 256 KiB file system without an error")
				}
				es := ents(next, next+uint64(tc.perSave)-1, 1, tc.dataSize)
				hs := raftpb.HardState{Term: 1, Vote: 1, Commit: next}
				if saveErr = w.Save(hs, es, true); saveErr == nil {
					acked, ackedHS = append(acked, es...), hs
				}
			}
			if !errors.Is(saveErr, syscall.ENOSPC) || !errors.Is(saveErr, ErrFailed) {
				t.Fatalf("Save on a full disk: got %v, want an error wrapping ENOSPC and ErrFailed", saveErr)
			}
			if len(acked) == 0 {
				t.Fatal("no Save succeeded before the disk was full")
			}
			if err := w.Save(raftpb.HardState{Term: 2}, nil, true); !errors.Is(err, ErrFailed) {
				t.Fatalf("Save after the failure: got %v, want ErrFailed", err)
			}
			w.Close()

			w, st := mustOpen(t, dir, opts)
			defer w.Close()
			if len(st.Entries) < len(acked) || !equalEntries(st.Entries[:len(acked)], acked) {
				t.Fatalf("after reopen: %s, want at least the %s acknowledged", describe(st.Entries), describe(acked))
			}
			if extra := len(st.Entries) - len(acked); extra > tc.perSave {
				t.Fatalf("after reopen: %d entries beyond the acknowledged ones, at most %d were attempted", extra, tc.perSave)
			}
			if st.HardState != ackedHS && st.HardState.Commit != ackedHS.Commit+uint64(tc.perSave) {
				t.Fatalf("HardState after reopen: %+v, want %+v or the failed Save's", st.HardState, ackedHS)
			}
			t.Logf("%d entries acknowledged before ENOSPC; %d recovered", len(acked), len(st.Entries))
		})
	}
}
