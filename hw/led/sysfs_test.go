package led

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeLED makes a kernel LED under root as sysfs has it: the device's
// directory, and class/leds/NAME a symlink to it.
func fakeLED(t *testing.T, root, name, maxBrightness, trigger string) string {
	t.Helper()
	dev := filepath.Join(root, "devices", "platform", "leds", "leds", name)
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, v := range map[string]string{"brightness": "0\n", "max_brightness": maxBrightness + "\n", "trigger": trigger + "\n"} {
		if err := os.WriteFile(filepath.Join(dev, file), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	class := filepath.Join(root, "class", "leds")
	if err := os.MkdirAll(class, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "devices", "platform", "leds", "leds", name), filepath.Join(class, name)); err != nil {
		t.Fatal(err)
	}
	return dev
}

// piTriggers is the ACT LED's trigger list on a Pi, mmc0 in use.
const piTriggers = "none rc-feedback kbd-scrolllock kbd-numlock kbd-capslock kbd-kanalock timer oneshot heartbeat backlight gpio cpu cpu0 cpu1 cpu2 cpu3 default-on input panic actpwr [mmc0] mmc1 rfkill-any rfkill-none"

func attr(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSysfsLight(t *testing.T) {
	root := t.TempDir()
	dev := fakeLED(t, root, "ACT", "255", piTriggers)
	os.WriteFile(filepath.Join(dev, "brightness"), []byte("255\n"), 0o644)

	l, err := Open(Spec{Kind: KindSysfs, Name: "ACT"}, WithSysfs(root))
	if err != nil {
		t.Fatal(err)
	}
	if got := attr(t, dev, "trigger"); got != "none" {
		t.Errorf("trigger after Open = %q, want none", got)
	}
	if got := attr(t, dev, "brightness"); got != "0" {
		t.Errorf("brightness after Open = %q, want 0 (off)", got)
	}
	if err := l.Set(true); err != nil {
		t.Fatal(err)
	}
	if got := attr(t, dev, "brightness"); got != "255" {
		t.Errorf("brightness lit = %q, want max_brightness 255", got)
	}
	if err := l.Set(false); err != nil {
		t.Fatal(err)
	}
	if got := attr(t, dev, "brightness"); got != "0" {
		t.Errorf("brightness dark = %q, want 0", got)
	}
	l.Set(true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := attr(t, dev, "brightness"); got != "0" {
		t.Errorf("brightness after Close = %q, want 0", got)
	}
	if got := attr(t, dev, "trigger"); got != "mmc0" {
		t.Errorf("trigger after Close = %q, want mmc0 restored", got)
	}
}

func TestSysfsLightMaxBrightnessOne(t *testing.T) {
	root := t.TempDir()
	dev := fakeLED(t, root, "PWR", "1", "none [default-on] timer")
	l, err := Open(Spec{Kind: KindSysfs, Name: "PWR"}, WithSysfs(root))
	if err != nil {
		t.Fatal(err)
	}
	l.Set(true)
	if got := attr(t, dev, "brightness"); got != "1" {
		t.Errorf("brightness lit = %q, want 1", got)
	}
	l.Close()
	if got := attr(t, dev, "trigger"); got != "default-on" {
		t.Errorf("trigger after Close = %q, want default-on", got)
	}
}

func TestSysfsLightWithoutTriggers(t *testing.T) {
	root := t.TempDir()
	dev := fakeLED(t, root, "led0", "255", "")
	os.Remove(filepath.Join(dev, "trigger"))
	l, err := Open(Spec{Kind: KindSysfs, Name: "led0"}, WithSysfs(root))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dev, "trigger")); !os.IsNotExist(err) {
		t.Errorf("Close made a trigger file: %v", err)
	}
}

func TestSysfsLightErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, root string)
		want   []string // in the error
		saved  string   // the trigger file after the failed Open ("" if not checked)
		absent bool
	}{
		{
			name:  "no such LED",
			setup: func(t *testing.T, root string) { fakeLED(t, root, "PWR", "255", piTriggers) },
			want:  []string{"hw: led sysfs:ACT: no such LED", filepath.Join("class", "leds", "ACT")},
		},
		{
			name:  "max_brightness not a number",
			setup: func(t *testing.T, root string) { fakeLED(t, root, "ACT", "lots", piTriggers) },
			want:  []string{"hw: led sysfs:ACT", filepath.Join("ACT", "max_brightness"), `"lots"`},
			saved: piTriggers,
		},
		{
			name:  "max_brightness zero",
			setup: func(t *testing.T, root string) { fakeLED(t, root, "ACT", "0", piTriggers) },
			want:  []string{"max_brightness", "not a positive brightness"},
			saved: piTriggers,
		},
		{
			name:  "no current trigger",
			setup: func(t *testing.T, root string) { fakeLED(t, root, "ACT", "255", "none mmc0 timer") },
			want:  []string{filepath.Join("ACT", "trigger"), "no current trigger in [brackets] among 3 triggers"},
			saved: "none mmc0 timer",
		},
		{
			name: "brightness not writable",
			setup: func(t *testing.T, root string) {
				dev := fakeLED(t, root, "ACT", "255", piTriggers)
				b := filepath.Join(dev, "brightness")
				os.Remove(b)
				os.Mkdir(b, 0o755) // writing fails even as root
			},
			want:  []string{"hw: led sysfs:ACT", filepath.Join("ACT", "brightness")},
			saved: "mmc0", // set to none, then restored
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			l, err := Open(Spec{Kind: KindSysfs, Name: "ACT"}, WithSysfs(root))
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.saved != "" {
				dev := filepath.Join(root, "class", "leds", "ACT")
				if got := strings.TrimSpace(attr(t, dev, "trigger")); got != tc.saved {
					t.Errorf("trigger after the failed Open = %q, want %q", got, tc.saved)
				}
			}
		})
	}
}

func TestSysfsBoardRestoresTrigger(t *testing.T) {
	root := t.TempDir()
	dev := fakeLED(t, root, "ACT", "255", piTriggers)
	l, err := Open(DefaultReadiness(root), WithSysfs(root))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, newStepClock(t), l, nil)
	r.do(func(b *Board) { b.SetReadiness(Ready) })
	if got := attr(t, dev, "brightness"); got != "255" {
		t.Errorf("brightness when Ready = %q, want 255", got)
	}
	r.do(func(b *Board) { b.SetReadiness(Starting) })
	r.clk.advance(500 * time.Millisecond)
	if got := attr(t, dev, "brightness"); got != "0" {
		t.Errorf("brightness 500 ms into Starting = %q, want 0", got)
	}
	r.clk.advance(500 * time.Millisecond)
	if err := r.b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := attr(t, dev, "brightness"); got != "0" {
		t.Errorf("brightness after Close = %q, want 0", got)
	}
	if got := attr(t, dev, "trigger"); got != "mmc0" {
		t.Errorf("trigger after Close = %q, want mmc0", got)
	}
}

func TestDefaultReadiness(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leds  []string
		files []string // entries of class/leds that are files, not LEDs
		want  string
	}{
		{"ACT", []string{"ACT", "PWR", "led0"}, nil, "sysfs:ACT"},
		{"led0 on an older kernel", []string{"led0", "led1"}, nil, "sysfs:led0"},
		{"no on-board LED", []string{"mmc0::"}, []string{"ACT"}, "none"},
		{"no LED class", nil, nil, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, name := range tc.leds {
				fakeLED(t, root, name, "255", piTriggers)
			}
			for _, name := range tc.files {
				os.MkdirAll(filepath.Join(root, "class", "leds"), 0o755)
				os.WriteFile(filepath.Join(root, "class", "leds", name), nil, 0o644)
			}
			if got := DefaultReadiness(root).String(); got != tc.want {
				t.Errorf("DefaultReadiness = %q, want %q", got, tc.want)
			}
		})
	}
}
