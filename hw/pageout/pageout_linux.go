package pageout

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Result is what a Release did.
type Result struct {
	// Advised is the size of the executable's read-only mappings, in
	// bytes: what the kernel was told of.
	Advised uint64
	// Before and After are the process's file-backed resident memory
	// (RssFile), in bytes, before and after.
	Before, After uint64
}

// Pages are the running executable's read-only mappings (text and
// rodata), fenced (see Find): what Release gives back.
type Pages struct {
	exe    string
	ranges []Mapping
}

// fence is the size of the pieces Find cuts the mappings into: a fault
// maps no page beyond its piece. The kernel maps the 64 KiB around the
// page a fault is for (fault-around, whatever the madvise advice), within
// the mapping; in pieces of 4 KiB a page that comes back brings no
// neighbour the agent does not use (40 MiB of text and rodata are then
// 10,240 mappings, about 2 MiB of the kernel's memory, against the ~20
// MiB of neighbours fault-around brought back).
const fence = 4 << 10

// faultAround is the most a fault maps (fault_around_bytes): with pages
// this large no fence is needed.
const faultAround = 64 << 10

// Find finds the running executable's read-only mappings (see the package
// comment) and cuts each into pieces of fence bytes, so that a fault
// brings back the page it is for alone: every other piece is advised
// MADV_DONTDUMP, which changes nothing else (the core dump of a process
// leaves its file-backed mappings out: coredump_filter's default), and
// the kernel keeps apart neighbours advised differently.
func Find() (*Pages, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("pageout: %w", err)
	}
	// smaps, not maps: it says which read-only mappings hold pages of
	// the process's own.
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("pageout: %w", err)
	}
	maps, err := ParseMaps(b)
	if err != nil {
		return nil, err
	}
	p := &Pages{exe: exe, ranges: ReadOnlyOf(maps, exe)}
	if len(p.ranges) == 0 {
		return nil, fmt.Errorf("pageout: /proc/self/smaps has no read-only mapping of %s", exe)
	}
	piece := uint64(max(fence, os.Getpagesize()))
	for _, m := range p.ranges {
		// MADV_RANDOM: a fault reads no more than its page from the file,
		// should the page have left the page cache.
		if err := p.advise(m.Start, m.End, m, unix.MADV_RANDOM); err != nil {
			return nil, err
		}
		if piece >= faultAround {
			continue
		}
		// Pieces counted from the mapping's start: the first stays as it
		// was, with the ELF header a core dump keeps.
		for a := m.Start + piece; a < m.End; a += 2 * piece {
			if err := p.advise(a, min(a+piece, m.End), m, unix.MADV_DONTDUMP); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// Release tells the kernel that the process no longer needs the resident
// pages of p (MADV_DONTNEED): they leave its page tables and stay in the
// page cache, clean copies of the file, from which those in use come back
// one fault each.
func (p *Pages) Release() (Result, error) {
	var r Result
	var err error
	if r.Before, err = rssFile(); err != nil {
		return r, err
	}
	for _, m := range p.ranges {
		if err := p.advise(m.Start, m.End, m, unix.MADV_DONTNEED); err != nil {
			return r, err
		}
		r.Advised += m.Size()
	}
	r.After, err = rssFile()
	return r, err
}

// advise gives the advice to the addresses from start to end, in m.
func (p *Pages) advise(start, end uint64, m Mapping, advice int) error {
	// The range is in one of the process's file mappings, no memory of
	// Go's.
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice)); errno != 0 {
		return fmt.Errorf("pageout: madvise %x-%x of %x-%x %s of %s: %w", start, end, m.Start, m.End, m.Perms, p.exe, errno)
	}
	return nil
}

// rssFile is the process's RssFile, in bytes.
func rssFile() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("pageout: %w", err)
	}
	return statusField(b, "RssFile")
}
