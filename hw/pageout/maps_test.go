package pageout

import (
	"strings"
	"testing"
)

// A static Go binary's maps, as Linux writes them (x86-64), with a path
// holding a space and a replaced binary.
const goMaps = `00400000-02165000 r-xp 00000000 fe:00 1812                               /usr/local/bin/isle
02165000-04357000 r--p 01d65000 fe:00 1812                               /usr/local/bin/isle
04357000-043d8000 rw-p 03f57000 fe:00 1812                               /usr/local/bin/isle
043d8000-04446000 rw-p 00000000 00:00 0 
c000000000-c004000000 rw-p 00000000 00:00 0 
7f3a4c000000-7f3a4c021000 rw-p 00000000 00:00 0 
7f3a50e5a000-7f3a50e5b000 r--p 00000000 fe:00 77                         /tmp/my files/data.bin
7f3a50e5b000-7f3a50e5c000 r--s 00000000 fe:00 78                         /usr/local/bin/isle
7f3a50e5c000-7f3a50e5d000 r-xp 00000000 fe:00 79                         /usr/local/bin/isle (deleted)
7ffd1b8e0000-7ffd1b901000 rw-p 00000000 00:00 0                          [stack]
7ffd1b9d3000-7ffd1b9d5000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`

func TestParseMaps(t *testing.T) {
	maps, err := ParseMaps([]byte(goMaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 12 {
		t.Fatalf("ParseMaps: %d mappings, want 12", len(maps))
	}
	for _, c := range []struct {
		i    int
		want Mapping
	}{
		{0, Mapping{Start: 0x400000, End: 0x2165000, Perms: "r-xp", Path: "/usr/local/bin/isle"}},
		{3, Mapping{Start: 0x43d8000, End: 0x4446000, Perms: "rw-p"}},
		{6, Mapping{Start: 0x7f3a50e5a000, End: 0x7f3a50e5b000, Perms: "r--p", Path: "/tmp/my files/data.bin"}},
		{8, Mapping{Start: 0x7f3a50e5c000, End: 0x7f3a50e5d000, Perms: "r-xp", Path: "/usr/local/bin/isle (deleted)"}},
		{11, Mapping{Start: 0xffffffffff600000, End: 0xffffffffff601000, Perms: "--xp", Path: "[vsyscall]"}},
	} {
		if maps[c.i] != c.want {
			t.Errorf("mapping %d = %+v, want %+v", c.i, maps[c.i], c.want)
		}
	}
	if maps[0].Size() != 0x1d65000 {
		t.Errorf("Size = %#x, want 0x1d65000", maps[0].Size())
	}
}

func TestParseMapsRejects(t *testing.T) {
	for _, c := range []struct{ name, line, want string }{
		{"too few fields", "00400000-00401000 r-xp 00000000 fe:00", "fields"},
		{"no range", "00400000 r-xp 00000000 fe:00 1 /bin/x", "start-end"},
		{"not hex", "0040000g-00401000 r-xp 00000000 fe:00 1 /bin/x", "hex"},
		{"backwards", "00402000-00401000 r-xp 00000000 fe:00 1 /bin/x", "in order"},
		{"permissions", "00400000-00401000 rx 00000000 fe:00 1 /bin/x", "permissions"},
	} {
		_, err := ParseMaps([]byte("00400000-00401000 r-xp 00000000 fe:00 1 /bin/x\n" + c.line + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: ParseMaps = %v, want an error about %q on line 2", c.name, err, c.want)
		}
	}
}

// Only the executable's text and read-only data: never its data and bss
// (rw-p, the program's variables), a shared mapping of it, another file
// or the replaced binary.
func TestReadOnlyOf(t *testing.T) {
	maps, err := ParseMaps([]byte(goMaps))
	if err != nil {
		t.Fatal(err)
	}
	got := ReadOnlyOf(maps, "/usr/local/bin/isle")
	want := []Mapping{maps[0], maps[1]}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ReadOnlyOf = %+v, want the text and rodata %+v", got, want)
	}
	if got := ReadOnlyOf(maps, "/usr/local/bin/isle (deleted)"); len(got) != 1 || got[0] != maps[8] {
		t.Errorf("ReadOnlyOf(a replaced binary) = %+v, want %+v", got, maps[8])
	}
	if got := ReadOnlyOf(maps, "/no/such/file"); len(got) != 0 {
		t.Errorf("ReadOnlyOf(a file not mapped) = %+v, want none", got)
	}
}

func TestStatusField(t *testing.T) {
	status := []byte("Name:\tisle\nVmRSS:\t   47104 kB\nRssAnon:\t   19456 kB\nRssFile:\t   27648 kB\nThreads:\t12\n")
	if n, err := statusField(status, "RssFile"); err != nil || n != 27648<<10 {
		t.Errorf("statusField(RssFile) = %d, %v; want %d", n, err, 27648<<10)
	}
	if _, err := statusField(status, "Threads"); err == nil || !strings.Contains(err.Error(), "kB") {
		t.Errorf("statusField(a count) = %v, want an error: not a size", err)
	}
	if _, err := statusField(status, "RssShmem"); err == nil || !strings.Contains(err.Error(), "no RssShmem") {
		t.Errorf("statusField(a missing line) = %v, want an error naming it", err)
	}
}
