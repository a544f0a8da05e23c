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
	r, err := Release()
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
	again, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if again.Before == 0 {
		t.Errorf("Release again = %+v: want the pages in use resident again", again)
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
