package hw

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LabelBoardModel is the Node label whose value is the board's model in
// label-safe form (see ModelLabel).
const LabelBoardModel = "isle.dev/board-model"

// Board is what the firmware and the kernel say about the board itself.
// Model and serial do not change while it runs; temperature and
// throttling do, so callers read it again from time to time.
type Board struct {
	// Model is the device tree's model ("Raspberry Pi 4 Model B Rev 1.4");
	// empty off a device-tree board (a PC, QEMU's virt machine).
	Model string
	// Serial is the device tree's serial-number, hexadecimal as the
	// firmware writes it ("10000000d94a609b"); empty where there is none.
	Serial string
	// MilliCelsius is the SoC temperature in thousandths of a degree
	// Celsius, from the kernel's thermal zone; meaningful only when
	// HasTemperature.
	MilliCelsius   int
	HasTemperature bool
	// Throttling is the firmware's under-voltage and throttling report
	// (only under-voltage on kernels from 2025 on: see
	// Throttling.UnderVoltageOnly); meaningful only when HasThrottling
	// (Raspberry Pi firmware: not other boards, not QEMU).
	Throttling    Throttling
	HasThrottling bool
}

// ReadBoard reads the board's facts under root: "/" on a board, a
// directory of fake files in tests.
//
// Each fact is optional: one whose file is absent stays empty (or its Has
// flag false) and is no error. One whose file is there but unreadable or
// malformed stays empty too, and err joins one error per such fact, each
// naming its file. So the Board is always usable: a caller logs err and
// reports what was read.
func ReadBoard(root string) (Board, error) {
	var b Board
	model, serial, dtErr := readDeviceTree(root)
	b.Model, b.Serial = model, serial
	var tempErr, throttleErr error
	b.MilliCelsius, b.HasTemperature, tempErr = readTemperature(root)
	b.Throttling, b.HasThrottling, throttleErr = readThrottling(root)
	return b, errors.Join(dtErr, tempErr, throttleErr)
}

// ModelLabel turns a model into a Kubernetes label value: lower case,
// every run of characters other than letters, digits, '.', '_' and '-'
// (and of '-') made one '-', at most 63 characters, starting and ending
// with a letter or digit. "Raspberry Pi 4 Model B Rev 1.4" becomes
// "raspberry-pi-4-model-b-rev-1.4". It is empty for an empty model (no
// label then).
func ModelLabel(model string) string {
	const maxLen = 63
	var b strings.Builder
	for _, r := range strings.ToLower(model) {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '.', r == '_':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	s := b.String() // only ASCII: cutting at a byte is cutting at a character
	if len(s) > maxLen {
		s = s[:maxLen]
	}
	return strings.TrimFunc(s, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') })
}

// deviceTrees are where the kernel shows the device tree it booted with:
// /proc/device-tree is a link to the other, which a container may have
// without /proc's.
var deviceTrees = []string{"/proc/device-tree", "/sys/firmware/devicetree/base"}

// readDeviceTree reads the model and serial-number properties of the
// first device tree under root; both are empty when there is none.
func readDeviceTree(root string) (model, serial string, err error) {
	for _, d := range deviceTrees {
		dir := filepath.Join(root, d)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		var modelErr, serialErr error
		if model, modelErr = readDTString(filepath.Join(dir, "model"), checkModel); modelErr != nil {
			modelErr = fmt.Errorf("hw: board model: %w", modelErr)
		}
		if serial, serialErr = readDTString(filepath.Join(dir, "serial-number"), checkSerial); serialErr != nil {
			serialErr = fmt.Errorf("hw: board serial: %w", serialErr)
		}
		return model, serial, errors.Join(modelErr, serialErr)
	}
	return "", "", nil
}

// readDTString reads a device tree string property, text ending in one
// NUL (accepted without it), and checks it with check. It is "" without
// error when the property is absent, "" with an error naming the file
// when it is unreadable or fails the check.
func readDTString(path string, check func(string) error) (string, error) {
	b, err := readSmall(path, 256)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(string(b), "\x00")
	if strings.Contains(s, "\x00") {
		err = fmt.Errorf("%q holds more than one string", s)
	} else {
		err = check(s)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// checkModel accepts a model that is printable UTF-8 text.
func checkModel(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q is not UTF-8 text", s)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
		return fmt.Errorf("%q has a control character at byte %d", s, i)
	}
	return nil
}

// checkSerial accepts a serial of hexadecimal digits.
func checkSerial(s string) error {
	const maxDigits = 32
	if s == "" || len(s) > maxDigits || strings.IndexFunc(s, func(r rune) bool { return !isHexDigit(r) }) >= 0 {
		return fmt.Errorf("%q is not 1 to %d hexadecimal digits", s, maxDigits)
	}
	return nil
}

func isHexDigit(r rune) bool {
	return '0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F'
}

const thermalZones = "/sys/class/thermal"

// socZoneTypes are thermal zone types that measure the SoC, best first:
// Raspberry Pi kernels (and many other ARM boards) name it cpu-thermal,
// some ARM boards soc-thermal, Intel PCs x86_pkg_temp.
var socZoneTypes = []string{"cpu-thermal", "soc-thermal", "x86_pkg_temp"}

// readTemperature reads the SoC's thermal zone under root (the first
// zone when none has a type of socZoneTypes); ok is false when there is
// no thermal zone.
func readTemperature(root string) (milliC int, ok bool, err error) {
	dir := filepath.Join(root, thermalZones)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("hw: SoC temperature: %w", err)
	}
	// thermal_zone0, thermal_zone1, …, thermal_zone10 in number order.
	var zones []int
	for _, e := range entries {
		s, found := strings.CutPrefix(e.Name(), "thermal_zone")
		if n, err := strconv.Atoi(s); found && err == nil && strconv.Itoa(n) == s {
			zones = append(zones, n)
		}
	}
	if len(zones) == 0 {
		return 0, false, nil
	}
	slices.Sort(zones)
	zoneDir := func(n int) string { return filepath.Join(dir, "thermal_zone"+strconv.Itoa(n)) }
	chosen, rank := zones[0], len(socZoneTypes)
	for _, n := range zones {
		b, err := readSmall(filepath.Join(zoneDir(n), "type"), 64)
		if err != nil {
			return 0, false, fmt.Errorf("hw: SoC temperature: %w", err)
		}
		if i := slices.Index(socZoneTypes, strings.TrimSpace(string(b))); i >= 0 && i < rank {
			chosen, rank = n, i
		}
	}
	path := filepath.Join(zoneDir(chosen), "temp")
	b, err := readSmall(path, 32)
	if err != nil {
		return 0, false, fmt.Errorf("hw: SoC temperature: %w", err)
	}
	const lowest, highest = -100_000, 200_000
	text := strings.TrimSpace(string(b))
	milliC, err = strconv.Atoi(text)
	if err != nil || milliC < lowest || milliC > highest {
		return 0, false, fmt.Errorf("hw: SoC temperature: %s: %q is not millidegrees Celsius from %d to %d",
			path, text, lowest, highest)
	}
	return milliC, true, nil
}

// throttledFiles are where Raspberry Pi kernels put the firmware's
// get_throttled, by the firmware node's place in the device tree: under
// soc (Pi 1 to 4), at the top. firmwareDevices finds it wherever else the
// firmware driver is bound (such as under a soc@address node).
var throttledFiles = []string{
	"/sys/devices/platform/soc/soc:firmware/get_throttled",
	"/sys/devices/platform/soc:firmware/get_throttled",
}

const firmwareDevices = "/sys/bus/platform/drivers/raspberrypi-firmware/*/get_throttled"

// hwmonDevices are the kernel's hardware monitors. The Raspberry Pi one
// (named rpi_volt, since kernel 4.19) has the under-voltage alarm,
// in0_lcrit_alarm: what kernels from 2025 on offer instead of
// get_throttled, which they no longer have.
const (
	hwmonDevices = "/sys/class/hwmon/hwmon*"
	piHwmonName  = "rpi_volt"
)

// readThrottling reads get_throttled under root or, without it, the
// under-voltage alarm; ok is false where there is neither.
func readThrottling(root string) (t Throttling, ok bool, err error) {
	path := ""
	for _, p := range throttledFiles {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			path = filepath.Join(root, p)
			break
		}
	}
	if path == "" {
		// Glob's only error is a malformed pattern, and these are fixed.
		if m, _ := filepath.Glob(filepath.Join(root, firmwareDevices)); len(m) > 0 {
			path = m[0]
		}
	}
	if path == "" {
		return readUnderVoltageAlarm(root)
	}
	b, err := readSmall(path, 32)
	if err != nil {
		return t, false, fmt.Errorf("hw: throttling: %w", err)
	}
	if t, err = parseThrottled(string(b)); err != nil {
		return t, false, fmt.Errorf("hw: throttling: %s: %w", path, err)
	}
	return t, true, nil
}

// readUnderVoltageAlarm reads the rpi_volt hardware monitor's alarm: 1
// when the firmware saw under-voltage since the driver last asked it,
// every 2 s.
func readUnderVoltageAlarm(root string) (t Throttling, ok bool, err error) {
	devices, _ := filepath.Glob(filepath.Join(root, hwmonDevices)) // a fixed pattern
	for _, dir := range devices {
		name, err := readSmall(filepath.Join(dir, "name"), 64)
		if err != nil || strings.TrimSpace(string(name)) != piHwmonName {
			continue // another monitor (one whose name cannot be read is not ours)
		}
		path := filepath.Join(dir, "in0_lcrit_alarm")
		b, err := readSmall(path, 8)
		if err != nil {
			return t, false, fmt.Errorf("hw: under-voltage alarm: %w", err)
		}
		switch text := strings.TrimSpace(string(b)); text {
		case "0", "1":
			return Throttling{UnderVoltage: text == "1", UnderVoltageOnly: true}, true, nil
		default:
			return t, false, fmt.Errorf("hw: under-voltage alarm: %s: %q is not 0 or 1", path, text)
		}
	}
	return t, false, nil
}

// readSmall reads a file of at most limit bytes: the kernel's files read
// here hold a few bytes, and a longer one is not one of them. Its errors
// name the file.
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err // an *fs.PathError, which names the file
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: longer than %d bytes", path, limit)
	}
	return b, nil
}
