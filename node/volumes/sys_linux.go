package volumes

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs with options opts on dir unless one is mounted
// there already. hardened adds nosuid and nodev.
func mountTmpfs(dir, opts string, hardened bool) error {
	mounted, err := isTmpfs(dir)
	if err != nil || mounted {
		return err
	}
	var flags uintptr
	if hardened {
		flags = unix.MS_NOSUID | unix.MS_NODEV
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("mount tmpfs (%s) on %s: %w", opts, dir, err)
	}
	return nil
}

// isTmpfs says whether a tmpfs is mounted on dir itself (not only on a
// directory above it).
func isTmpfs(dir string) (bool, error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if sfs.Type != unix.TMPFS_MAGIC {
		return false, nil
	}
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	return st.Dev != parent.Dev, nil
}

// UnmountUnder detaches every mount on dir or below it, deepest first,
// and checks that none is left.
func UnmountUnder(dir string) error {
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	left, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("still mounted, so nothing was removed: %s", strings.Join(left, ", "))
	}
	return nil
}

// mountsUnder lists the mount points on dir or below it, from
// /proc/self/mountinfo, deepest first (a point mounted twice is listed
// twice).
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			return nil, fmt.Errorf("/proc/self/mountinfo: malformed line %q", sc.Text())
		}
		p := unescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/proc/self/mountinfo: %w", err)
	}
	slices.SortStableFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return points, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a path
// in /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// diskUsage counts the blocks allocated below dir, as du does: a file
// with several links once, other file systems mounted below not at all.
func diskUsage(dir string) (int64, error) {
	var root unix.Stat_t
	if err := unix.Lstat(dir, &root); err != nil {
		return 0, err
	}
	var total int64
	var seen map[uint64]bool
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed by a container meanwhile
			}
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", path)
		}
		if uint64(st.Dev) != uint64(root.Dev) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen == nil {
				seen = map[uint64]bool{}
			}
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// bindSubPath bind-mounts sub, a path inside the volume at root, on
// target, making target (a directory or an empty file, like the source)
// and, if create, the missing directories of sub (0755). sub is resolved by the kernel
// beneath root (openat2 RESOLVE_BENEATH): no symlink or .. can take it
// outside, and the mount is made from the file descriptor it resolved to,
// so that a container changing a symlink meanwhile cannot redirect it.
// A mount already on target is replaced.
func bindSubPath(root, sub, target string, create bool) error {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open volume %s: %w", root, err)
	}
	defer unix.Close(rootFd)
	fd, err := openBeneath(rootFd, sub, create)
	switch {
	case err == unix.EXDEV || err == unix.ELOOP:
		return fmt.Errorf("subPath %q resolves outside the volume (through a symlink or ..)", sub)
	case err == unix.ENOSYS:
		return fmt.Errorf("subPath %q: resolving it safely needs openat2 (Linux 5.6 or later)", sub)
	case err != nil:
		return fmt.Errorf("subPath %q: %w", sub, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("subPath %q: %w", sub, err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	if err := makeMountTarget(target, isDir); err != nil {
		return err
	}
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind subPath %q of %s on %s: %w", sub, root, target, err)
	}
	return nil
}

// openBeneath opens sub (O_PATH) resolved beneath rootFd, making its
// missing directories if create.
func openBeneath(rootFd int, sub string, create bool) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(rootFd, sub, how)
	if err != unix.ENOENT || !create {
		return fd, err
	}
	elems := strings.Split(sub, "/")
	for i := range elems {
		parent := "."
		if i > 0 {
			parent = strings.Join(elems[:i], "/")
		}
		pfd, err := unix.Openat2(rootFd, parent, how)
		if err != nil {
			return -1, err
		}
		err = unix.Mkdirat(pfd, elems[i], 0o755)
		unix.Close(pfd)
		if err != nil && err != unix.EEXIST {
			return -1, err
		}
	}
	return unix.Openat2(rootFd, sub, how)
}

// makeMountTarget makes target a directory or an empty file, replacing
// one of the other kind.
func makeMountTarget(target string, dir bool) error {
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() != dir {
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	if dir {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// fileGroup is the group that owns a file.
func fileGroup(fi fs.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Gid), true
}
