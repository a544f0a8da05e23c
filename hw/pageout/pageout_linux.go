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

// Release tells the kernel that the process no longer needs the
// resident pages of its executable's read-only mappings (see the package
// comment), and to bring back only the page touched at each fault, not
// the 64 KiB around it.
func Release() (Result, error) {
	var r Result
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return r, fmt.Errorf("pageout: %w", err)
	}
	// smaps, not maps: it says which read-only mappings hold pages of
	// the process's own.
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return r, fmt.Errorf("pageout: %w", err)
	}
	maps, err := ParseMaps(b)
	if err != nil {
		return r, err
	}
	ranges := ReadOnlyOf(maps, exe)
	if len(ranges) == 0 {
		return r, fmt.Errorf("pageout: /proc/self/smaps has no read-only mapping of %s", exe)
	}
	if r.Before, err = rssFile(); err != nil {
		return r, err
	}
	for _, m := range ranges {
		// MADV_RANDOM: a fault maps the page it is for alone (no
		// fault-around; nor read-ahead, should the page have left the
		// page cache), so the pages that come back are those in use.
		// MADV_DONTNEED: the pages leave the process's page tables;
		// they stay in the page cache, clean copies of the file.
		for _, advice := range []int{unix.MADV_RANDOM, unix.MADV_DONTNEED} {
			// The range is one of the process's file mappings, no memory
			// of Go's.
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.Start), uintptr(m.Size()), uintptr(advice)); errno != 0 {
				return r, fmt.Errorf("pageout: madvise %x-%x %s of %s: %w", m.Start, m.End, m.Perms, exe, errno)
			}
		}
		r.Advised += m.Size()
	}
	r.After, err = rssFile()
	return r, err
}

// rssFile is the process's RssFile, in bytes.
func rssFile() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("pageout: %w", err)
	}
	return statusField(b, "RssFile")
}
