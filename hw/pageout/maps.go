package pageout

import (
	"fmt"
	"strconv"
	"strings"
)

// Mapping is one line of a /proc/PID/maps: a range of the address space
// and what backs it.
type Mapping struct {
	Start, End uint64 // the range's addresses, End excluded
	Perms      string // "r-xp": read, write, execute, private or shared
	// Path is the file mapped (ending in " (deleted)" once it is
	// replaced), or [heap], [stack]...; "" for anonymous memory.
	Path string
	// Anonymous is, in a /proc/PID/smaps, the bytes of the range that
	// are the process's own: in a private mapping of a file, the pages
	// written to since (copies, which the file does not hold).
	Anonymous uint64
}

// Size is the range's length in bytes.
func (m Mapping) Size() uint64 { return m.End - m.Start }

// ParseMaps parses a /proc/PID/maps, or a /proc/PID/smaps (each
// mapping followed by "Key: N kB" lines, of which Anonymous is kept).
func ParseMaps(b []byte) ([]Mapping, error) {
	var out []Mapping
	n := 0
	for line := range strings.Lines(string(b)) {
		n++
		if line = strings.TrimRight(line, "\n"); line == "" {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.Contains(k, " ") { // an smaps "Key: value" line
			if len(out) == 0 {
				return nil, fmt.Errorf("pageout: maps line %d: %q before any mapping", n, line)
			}
			if k == "Anonymous" {
				size, err := kB(v)
				if err != nil {
					return nil, fmt.Errorf("pageout: maps line %d: Anonymous: %w", n, err)
				}
				out[len(out)-1].Anonymous = size
			}
			continue
		}
		m, err := parseMapping(line)
		if err != nil {
			return nil, fmt.Errorf("pageout: maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// parseMapping parses "start-end perms offset dev inode [path]".
func parseMapping(line string) (Mapping, error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return Mapping{}, fmt.Errorf("%q: %d fields, want at least 5", line, len(f))
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return Mapping{}, fmt.Errorf("%q: range %q is not start-end", line, f[0])
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end < start {
		return Mapping{}, fmt.Errorf("%q: range %q is not two hex addresses in order", line, f[0])
	}
	if len(f[1]) != 4 {
		return Mapping{}, fmt.Errorf("%q: permissions %q are not 4 letters", line, f[1])
	}
	m := Mapping{Start: start, End: end, Perms: f[1]}
	if len(f) > 5 {
		// The path is the rest of the line after the inode; it may hold
		// spaces.
		rest := line
		for range 5 {
			rest = strings.TrimLeft(rest, " ")
			rest = rest[strings.IndexByte(rest, ' ')+1:]
		}
		m.Path = strings.TrimSpace(rest)
	}
	return m, nil
}

// ReadOnlyOf returns the mappings of the file path that the process
// can read but not write, does not share, and has not written to: an
// executable's text (r-xp) and read-only data (r--p). Their pages are the
// file's own, never the process's data (which is in the writable rw-p
// mappings), so the kernel can drop them from the process and find them
// again in the page cache. A read-only mapping holding pages of the
// process's own (Anonymous, from an smaps) is left out: a dynamic
// linker's relocations (RELRO), a debugger's breakpoints, which dropping
// would lose.
func ReadOnlyOf(maps []Mapping, path string) []Mapping {
	var out []Mapping
	for _, m := range maps {
		if m.Path == path && m.Perms[0] == 'r' && m.Perms[1] == '-' && m.Perms[3] == 'p' && m.Anonymous == 0 {
			out = append(out, m)
		}
	}
	return out
}
