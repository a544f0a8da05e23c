package hw

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// writeTree makes under root the files and links that spec lists, in the
// format of testdata/boards (see its README).
func writeTree(t *testing.T, root, spec string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(spec))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok || !filepath.IsLocal(name) {
			t.Fatalf("tree line %d: %q: want a relative path, a space, and a quoted string or -> target", n, line)
		}
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, isLink := strings.CutPrefix(rest, "-> "); isLink {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		text, err := strconv.Unquote(rest)
		if err != nil {
			t.Fatalf("tree line %d: %q: %v", n, line, err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// boardTree makes a temporary root holding testdata/boards/name.tree.
func boardTree(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "boards", name+".tree"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	writeTree(t, root, string(b))
	return root
}

func TestReadBoard(t *testing.T) {
	for _, tc := range []struct {
		tree  string
		want  Board
		label string
	}{
		{
			tree: "pi3b",
			want: Board{Model: "Raspberry Pi 3 Model B Rev 1.2", Serial: "00000000c3b9a4e1", MilliCelsius: 53692, HasTemperature: true,
				Throttling: Throttling{UnderVoltageOccurred: true, ThrottledOccurred: true, Raw: 0x50000}, HasThrottling: true},
			label: "raspberry-pi-3-model-b-rev-1.2",
		},
		{
			tree: "pi4b",
			want: Board{Model: "Raspberry Pi 4 Model B Rev 1.4", Serial: "100000003a7f52c8", MilliCelsius: 47712, HasTemperature: true,
				HasThrottling: true},
			label: "raspberry-pi-4-model-b-rev-1.4",
		},
		{
			tree: "pi5b",
			want: Board{Model: "Raspberry Pi 5 Model B Rev 1.0", Serial: "5e3f1a9c0b7d2468", MilliCelsius: 61250, HasTemperature: true,
				Throttling: Throttling{UnderVoltage: true, UnderVoltageOnly: true}, HasThrottling: true},
			label: "raspberry-pi-5-model-b-rev-1.0",
		},
		{
			tree: "zero2w",
			want: Board{Model: "Raspberry Pi Zero 2 W Rev 1.0", Serial: "000000007a5d21f0", MilliCelsius: 44545, HasTemperature: true,
				Throttling:    Throttling{UnderVoltage: true, Throttled: true, UnderVoltageOccurred: true, ThrottledOccurred: true, Raw: 0x50005},
				HasThrottling: true},
			label: "raspberry-pi-zero-2-w-rev-1.0",
		},
		{tree: "pc", want: Board{MilliCelsius: 45000, HasTemperature: true}},
		{tree: "qemu-virt", want: Board{}},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			got, err := ReadBoard(boardTree(t, tc.tree))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("board:\n got %+v\nwant %+v", got, tc.want)
			}
			if l := ModelLabel(got.Model); l != tc.label {
				t.Errorf("label %q, want %q", l, tc.label)
			}
		})
	}
}

// Variations on the Pi 4's tree: a malformed fact is left out and its
// error, naming the file, returned with the facts that could be read; the
// files in their other places are found.
func TestReadBoardVariations(t *testing.T) {
	const (
		model     = "proc/device-tree/model"
		serial    = "proc/device-tree/serial-number"
		temp      = "sys/devices/virtual/thermal/thermal_zone0/temp"
		tempClass = "sys/class/thermal/thermal_zone0/temp" // the path errors name
		throttled = "sys/devices/platform/soc/soc:firmware/get_throttled"
		alarm     = "sys/devices/platform/soc/soc:firmware/raspberrypi-hwmon/hwmon/hwmon1/in0_lcrit_alarm"
	)
	good := Board{Model: "Raspberry Pi 4 Model B Rev 1.4", Serial: "100000003a7f52c8", MilliCelsius: 47712, HasTemperature: true,
		HasThrottling: true}
	for _, tc := range []struct {
		name string
		// edit is written over the pi4b tree, after remove is removed.
		edit   string
		remove []string
		// want is the board read; errs are strings the error must have
		// (none: no error).
		want Board
		errs []string
	}{
		{
			name: "model with control characters",
			edit: model + ` "Raspberry Pi 4\x1b[31m Model B\x00"`,
			want: Board{Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true, HasThrottling: true},
			errs: []string{"hw: board model: ", model, "control character at byte 14"},
		},
		{
			name: "model of two strings",
			edit: model + ` "Raspberry Pi 4 Model B Rev 1.4\x00Rev 1.5\x00"`,
			want: Board{Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true, HasThrottling: true},
			errs: []string{model, "more than one string"},
		},
		{
			name: "model not UTF-8",
			edit: model + ` "Raspberry Pi \xff\x00"`,
			want: Board{Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true, HasThrottling: true},
			errs: []string{model, "not UTF-8"},
		},
		{
			name:   "model unreadable",
			remove: []string{model},
			edit:   model + `/x "a directory, not a file"`,
			want:   Board{Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true, HasThrottling: true},
			errs:   []string{model, "is a directory"},
		},
		{
			name: "model without its NUL",
			edit: model + ` "Raspberry Pi 4 Model B Rev 1.4"`,
			want: good,
		},
		{
			name: "serial not hexadecimal",
			edit: serial + ` "10000000zz7f52c8\x00"`,
			want: Board{Model: good.Model, MilliCelsius: good.MilliCelsius, HasTemperature: true, HasThrottling: true},
			errs: []string{"hw: board serial: ", serial, `"10000000zz7f52c8" is not 1 to 32 hexadecimal digits`},
		},
		{
			name: "serial empty",
			edit: serial + ` "\x00"`,
			want: Board{Model: good.Model, MilliCelsius: good.MilliCelsius, HasTemperature: true, HasThrottling: true},
			errs: []string{serial, "hexadecimal digits"},
		},
		{
			name: "temperature not a number",
			edit: temp + ` "n/a\n"`,
			want: Board{Model: good.Model, Serial: good.Serial, HasThrottling: true},
			errs: []string{"hw: SoC temperature: ", tempClass, `"n/a" is not millidegrees Celsius`},
		},
		{
			name: "temperature out of range",
			edit: temp + ` "47712000\n"`,
			want: Board{Model: good.Model, Serial: good.Serial, HasThrottling: true},
			errs: []string{tempClass, "from -100000 to 200000"},
		},
		{
			name: "get_throttled not hexadecimal",
			edit: throttled + ` "0xZZ\n"`,
			want: Board{Model: good.Model, Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true},
			errs: []string{"hw: throttling: ", throttled, `"0xZZ" is not a hexadecimal bitmask`},
		},
		{
			name: "get_throttled too long",
			edit: throttled + ` "` + strings.Repeat("0", 40) + `5\n"`,
			want: Board{Model: good.Model, Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true},
			errs: []string{throttled, "longer than 32 bytes"},
		},
		{
			name:   "everything malformed",
			edit:   model + ` "\x07\x00"` + "\n" + temp + ` "hot\n"` + "\n" + throttled + ` "-1\n"`,
			remove: []string{serial},
			want:   Board{},
			errs:   []string{model, tempClass, throttled},
		},
		{
			name: "get_throttled at the top of platform",
			remove: []string{throttled, "sys/bus/platform/drivers/raspberrypi-firmware/soc:firmware",
				"sys/devices/platform/soc"},
			edit: `sys/devices/platform/soc:firmware/get_throttled "20002\n"`,
			want: Board{Model: good.Model, Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true,
				Throttling: Throttling{ArmFreqCapped: true, ArmFreqCappedOccurred: true, Raw: 0x20002}, HasThrottling: true},
		},
		{
			name: "get_throttled found through the firmware driver",
			remove: []string{throttled, "sys/bus/platform/drivers/raspberrypi-firmware/soc:firmware",
				"sys/devices/platform/soc"},
			edit: `sys/devices/platform/soc@107c000000/soc@107c000000:firmware/get_throttled "80008\n"` + "\n" +
				`sys/bus/platform/drivers/raspberrypi-firmware/soc@107c000000:firmware -> ../../../../devices/platform/soc@107c000000/soc@107c000000:firmware`,
			want: Board{Model: good.Model, Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true,
				Throttling: Throttling{SoftTempLimit: true, SoftTempLimitOccurred: true, Raw: 0x80008}, HasThrottling: true},
		},
		{
			name:   "no get_throttled: the alarm",
			remove: []string{throttled, "sys/bus/platform/drivers/raspberrypi-firmware/soc:firmware"},
			want: Board{Model: good.Model, Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true,
				Throttling: Throttling{UnderVoltageOnly: true}, HasThrottling: true},
		},
		{
			name:   "alarm not 0 or 1",
			remove: []string{throttled},
			edit:   alarm + ` "on\n"`,
			want:   Board{Model: good.Model, Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true},
			errs:   []string{"hw: under-voltage alarm: ", "hwmon1/in0_lcrit_alarm", `"on" is not 0 or 1`},
		},
		{
			name:   "neither get_throttled nor the alarm",
			remove: []string{throttled, "sys/devices/platform/soc/soc:firmware/raspberrypi-hwmon"},
			want:   Board{Model: good.Model, Serial: good.Serial, MilliCelsius: good.MilliCelsius, HasTemperature: true},
		},
		{
			name: "more zones, cpu-thermal not first",
			edit: `sys/class/thermal/thermal_zone1/type "rp1_adc\n"` + "\n" +
				`sys/class/thermal/thermal_zone1/temp "39000\n"` + "\n" +
				`sys/devices/virtual/thermal/thermal_zone0/type "acpitz\n"` + "\n" +
				`sys/class/thermal/thermal_zone10/type "cpu-thermal\n"` + "\n" +
				`sys/class/thermal/thermal_zone10/temp "-5250\n"` + "\n" +
				`sys/class/thermal/thermal_zone2/type "cpu-thermal\n"` + "\n" +
				`sys/class/thermal/thermal_zone2/temp "51000\n"`,
			want: Board{Model: good.Model, Serial: good.Serial, MilliCelsius: 51000, HasTemperature: true, HasThrottling: true},
		},
		{
			name: "below freezing",
			edit: temp + ` "-5250\n"`,
			want: Board{Model: good.Model, Serial: good.Serial, MilliCelsius: -5250, HasTemperature: true, HasThrottling: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := boardTree(t, "pi4b")
			for _, p := range tc.remove {
				if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
					t.Fatal(err)
				}
			}
			writeTree(t, root, tc.edit)
			got, err := ReadBoard(root)
			if got != tc.want {
				t.Errorf("board:\n got %+v\nwant %+v", got, tc.want)
			}
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want one with %q", tc.errs)
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// The first zone counts when none is the SoC's.
func TestReadTemperatureFirstZone(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, `sys/class/thermal/thermal_zone3/type "gpu-thermal\n"
sys/class/thermal/thermal_zone3/temp "61000\n"
sys/class/thermal/thermal_zone11/type "acpitz\n"
sys/class/thermal/thermal_zone11/temp "30000\n"`)
	milliC, ok, err := readTemperature(root)
	if err != nil || !ok || milliC != 61000 {
		t.Fatalf("got %d, %v, %v; want 61000 from thermal_zone3", milliC, ok, err)
	}
}

// labelValue is how Kubernetes validates a label value.
var labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

func TestModelLabel(t *testing.T) {
	for _, tc := range []struct{ model, want string }{
		{"Raspberry Pi 4 Model B Rev 1.4", "raspberry-pi-4-model-b-rev-1.4"},
		{"Raspberry Pi 3 Model B Plus Rev 1.3", "raspberry-pi-3-model-b-plus-rev-1.3"},
		{"Raspberry Pi Compute Module 4 Rev 1.0", "raspberry-pi-compute-module-4-rev-1.0"},
		{"Raspberry Pi Model B+", "raspberry-pi-model-b"},
		{"  -- Hardkernel ODROID-N2Plus --  ", "hardkernel-odroid-n2plus"},
		{"Pine64 RockPro64 v2.1", "pine64-rockpro64-v2.1"},
		{"Board (rev_2) / test", "board-rev_2-test"},
		{"Überboard Ñ 2", "berboard-2"},
		{"NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super", "nvidia-jetson-orin-nano-engineering-reference-developer-kit-sup"},
		{strings.Repeat("a", 62) + " b", strings.Repeat("a", 62)},
		{"", ""},
		{"+++", ""},
	} {
		got := ModelLabel(tc.model)
		if got != tc.want {
			t.Errorf("ModelLabel(%q) = %q, want %q", tc.model, got, tc.want)
		}
		if len(got) > 63 || !labelValue.MatchString(got) {
			t.Errorf("ModelLabel(%q) = %q: not a label value", tc.model, got)
		}
	}
}

// Whatever the model, the label is a valid label value.
func FuzzModelLabel(f *testing.F) {
	for _, s := range []string{"Raspberry Pi 4 Model B Rev 1.4", "-.-", "a" + strings.Repeat(".", 70) + "b", "\x00\xff", "Ω"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, model string) {
		if got := ModelLabel(model); len(got) > 63 || !labelValue.MatchString(got) {
			t.Fatalf("ModelLabel(%q) = %q: not a label value", model, got)
		}
	})
}
