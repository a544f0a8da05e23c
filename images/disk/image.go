package disk

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
)

// copyBlock is the unit copyInto compares with zeros and skips.
const copyBlock = 64 << 10

// writeImage writes the image file file: sparse, img.Size bytes, a DOS
// partition table laid out as img says, and the filesystem files bootFS and
// rootFS copied to their partitions.
func writeImage(ctx context.Context, file string, img Image, bootFS, rootFS string) error {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return fmt.Errorf("images: disk: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(img.Size); err != nil {
		return fmt.Errorf("images: disk: %w", err)
	}
	if err := partition(ctx, file, img); err != nil {
		return err
	}
	if err := copyInto(ctx, f, img.Boot, bootFS); err != nil {
		return err
	}
	if err := copyInto(ctx, f, img.Root, rootFS); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("images: disk: %w", err)
	}
	return nil
}

// partition writes the partition table with sfdisk: partition 1 FAT32 (LBA),
// partition 2 Linux, in 512-byte sectors.
func partition(ctx context.Context, file string, img Image) error {
	script := fmt.Sprintf("label: dos\nlabel-id: 0x%08x\nunit: sectors\n\n"+
		"start=%d, size=%d, type=c\nstart=%d, size=%d, type=83\n",
		img.DiskID, img.Boot.Start/512, img.Boot.Size/512, img.Root.Start/512, img.Root.Size/512)
	if err := run(ctx, nil, script, "sfdisk", "--no-reread", "--no-tell-kernel", file); err != nil {
		return fmt.Errorf("images: disk: partition table: %w", err)
	}
	return nil
}

// copyInto copies the file src into f at p.Start, seeking over all-zero
// blocks so that f stays sparse. src must fit in p.
func copyInto(ctx context.Context, f *os.File, p Partition, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("images: disk: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("images: disk: %w", err)
	}
	if fi.Size() > p.Size {
		return fmt.Errorf("images: disk: %s takes %d bytes, more than its partition's %d", src, fi.Size(), p.Size)
	}
	buf := make([]byte, copyBlock)
	zero := make([]byte, copyBlock)
	for off := int64(0); ; off += copyBlock {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("images: disk: copying %s: %w", src, err)
		}
		n, err := io.ReadFull(in, buf)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := f.WriteAt(buf[:n], p.Start+off); err != nil {
				return fmt.Errorf("images: disk: %w", err)
			}
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return nil
		default:
			return fmt.Errorf("images: disk: %w", err)
		}
	}
}
