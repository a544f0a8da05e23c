package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// scanBoot checks that the tree at dir holds only what FAT can: directories
// and regular files with names VFAT takes, no two in a directory differing
// only in case. It returns the files' total size in bytes.
func scanBoot(dir string) (int64, error) {
	var total int64
	seen := map[string]string{} // lower-cased path: path
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			if err := fatName(d.Name()); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			key := strings.ToLower(p)
			if other, ok := seen[key]; ok {
				return fmt.Errorf("%s and %s differ only in case, which FAT does not tell apart", other, p)
			}
			seen[key] = p
		}
		switch t := d.Type(); {
		case t.IsDir():
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink: FAT cannot hold one; put the file it points to there instead", p)
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
		default:
			return fmt.Errorf("%s is a %v, not a regular file or directory: FAT cannot hold one", p, t.Type())
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("images: disk: boot: %w", err)
	}
	return total, nil
}

// fatName says why VFAT cannot hold a file named name, or returns nil.
func fatName(name string) error {
	if strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f || strings.ContainsRune(`"*/:<>?\|`, r) }) {
		return errors.New(`VFAT names cannot hold control characters nor any of "*/:<>?\|`)
	}
	if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return errors.New("VFAT names cannot end in a dot or a space")
	}
	return nil
}

// makeFAT makes a FAT32 filesystem of l.BootSize bytes labelled l.BootLabel
// in the new file file and copies dir's tree into it, modes (read-only or
// not) and modification times kept.
func makeFAT(ctx context.Context, file, dir string, l Layout) error {
	kib := strconv.FormatInt(l.BootSize/1024, 10)
	if err := run(ctx, nil, "", "mkfs.vfat", "-F", "32", "-n", l.BootLabel, "-C", file, kib); err != nil {
		return fmt.Errorf("images: disk: boot: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("images: disk: boot: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	args := []string{"-s", "-p", "-m", "-Q", "-i", file}
	for _, e := range entries {
		args = append(args, filepath.Join(dir, e.Name()))
	}
	args = append(args, "::/")
	if err := run(ctx, []string{"MTOOLS_SKIP_CHECK=1"}, "", "mcopy", args...); err != nil {
		return fmt.Errorf("images: disk: boot: copying %s into a FAT filesystem of %d bytes (Layout.BootSize): %w", dir, l.BootSize, err)
	}
	return nil
}
