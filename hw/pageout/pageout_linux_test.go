package pageout

import (
	"os"
	"testing"
)

// Variables in the binary's data and bss segments, which Release must
// leave as they are: the writable mappings hold the program's state.
var (
	data = [8192]byte{0: 1, 8191: 2} // initialized: in the data segment
	bss  [1 << 16]byte               // zeroed: in bss
)

// Release drops the test binary's resident text and read-only data, and
// the program runs on with its variables intact.
func TestRelease(t *testing.T) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil && len(b) > 0 && stateOf(b) < 'A' {
		t.Skip("/proc/self is emulated (qemu-user): its maps are the guest's, its RSS the emulator's")
	}
	bss[1000], data[4000] = 7, 9
	pages, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	r, err := pages.Release()
	if err != nil {
		t.Fatal(err)
	}
	if r.Advised == 0 || r.Before == 0 || r.After >= r.Before {
		t.Errorf("Release = %+v: want the read-only mappings advised and RssFile lower after", r)
	}
	if data[0] != 1 || data[8191] != 2 || data[4000] != 9 || bss[1000] != 7 || bss[2000] != 0 {
		t.Errorf("the data and bss segments changed: data %d %d %d, bss %d %d", data[0], data[8191], data[4000], bss[1000], bss[2000])
	}
	// The pages come back as the code runs again.
	again, err := pages.Release()
	if err != nil {
		t.Fatal(err)
	}
	if again.Before == 0 {
		t.Errorf("Release again = %+v: want the pages in use resident again", again)
	}
}

// Find cuts the executable's read-only mappings into pieces of fence
// bytes, which the kernel keeps apart: a fault maps no more than its
// piece.
func TestFindFences(t *testing.T) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil && len(b) > 0 && stateOf(b) < 'A' {
		t.Skip("/proc/self is emulated (qemu-user): its maps are the guest's")
	}
	if os.Getpagesize() >= faultAround {
		t.Skip("pages of 64 KiB: a fault maps its page alone, and Find leaves the mappings whole")
	}
	pages, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := ParseMaps(b)
	if err != nil {
		t.Fatal(err)
	}
	var size uint64
	for _, m := range pages.ranges {
		size += m.Size()
	}
	n := 0
	for _, m := range ReadOnlyOf(maps, pages.exe) {
		n++
		if piece := uint64(max(fence, os.Getpagesize())); m.Size() > piece {
			t.Errorf("mapping %x-%x of %s: %d bytes, want at most %d", m.Start, m.End, pages.exe, m.Size(), piece)
		}
	}
	if want := size / fence; uint64(n) < want {
		t.Errorf("%d read-only mappings of %s (%d bytes), want at least %d", n, pages.exe, size, want)
	}
}

// stateOf is the state letter of a /proc/PID/stat.
func stateOf(stat []byte) byte {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' && i+2 < len(stat) {
			return stat[i+2]
		}
	}
	return 0
}
