package led

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxAttr bounds what is read of a sysfs attribute; a trigger list is
// well under 4 KiB.
const maxAttr = 16 << 10

// sysfsLight is a kernel LED, /sys/class/leds/NAME.
type sysfsLight struct {
	spec       Spec
	brightness string // path of the brightness attribute
	trigger    string // path of the trigger attribute
	full       string // max_brightness: what lights the LED
	saved      string // the trigger to restore; empty if the LED has none
}

func openSysfs(spec Spec, root string) (Light, error) {
	dir := filepath.Join(root, "class", "leds", spec.Name)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("hw: led %s: no such LED: %w", spec, err)
	}
	l := &sysfsLight{
		spec:       spec,
		brightness: filepath.Join(dir, "brightness"),
		trigger:    filepath.Join(dir, "trigger"),
	}
	maxPath := filepath.Join(dir, "max_brightness")
	full, err := readAttr(maxPath)
	if err != nil {
		return nil, fmt.Errorf("hw: led %s: %w", spec, err)
	}
	if n, err := strconv.ParseInt(full, 10, 32); err != nil || n <= 0 {
		return nil, fmt.Errorf("hw: led %s: %s: %q is not a positive brightness", spec, maxPath, full)
	}
	l.full = full
	list, err := readAttr(l.trigger)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A kernel without LED triggers: nothing to save or restore.
	case err != nil:
		return nil, fmt.Errorf("hw: led %s: %w", spec, err)
	default:
		if l.saved, err = currentTrigger(list); err != nil {
			return nil, fmt.Errorf("hw: led %s: %s: %w", spec, l.trigger, err)
		}
		if err := writeAttr(l.trigger, "none"); err != nil {
			return nil, fmt.Errorf("hw: led %s: %w", spec, err)
		}
	}
	if err := l.Set(false); err != nil {
		return nil, errors.Join(err, l.restore())
	}
	return l, nil
}

// currentTrigger finds the trigger in use in the kernel's list, where it
// is in brackets: "none rc-feedback [mmc0] timer heartbeat".
func currentTrigger(list string) (string, error) {
	for _, f := range strings.Fields(list) {
		if len(f) > 2 && f[0] == '[' && f[len(f)-1] == ']' {
			return f[1 : len(f)-1], nil
		}
	}
	return "", fmt.Errorf("no current trigger in [brackets] among %d triggers", len(strings.Fields(list)))
}

// Set writes the LED's brightness: max_brightness or 0.
func (l *sysfsLight) Set(on bool) error {
	v := "0"
	if on {
		v = l.full
	}
	if err := writeAttr(l.brightness, v); err != nil {
		return fmt.Errorf("hw: led %s: %w", l.spec, err)
	}
	return nil
}

// Close puts the LED out and restores its trigger.
func (l *sysfsLight) Close() error {
	return errors.Join(l.Set(false), l.restore())
}

func (l *sysfsLight) restore() error {
	if l.saved == "" {
		return nil
	}
	if err := writeAttr(l.trigger, l.saved); err != nil {
		return fmt.Errorf("hw: led %s: restoring trigger %s: %w", l.spec, l.saved, err)
	}
	return nil
}

// readAttr reads a sysfs attribute, without its trailing newline.
func readAttr(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAttr+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxAttr {
		return "", fmt.Errorf("read %s: longer than %d bytes", path, maxAttr)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeAttr writes a sysfs attribute, which must exist. Its errors name
// the file (they are *fs.PathError).
func writeAttr(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	return errors.Join(err, f.Close())
}
