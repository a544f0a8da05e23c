package led

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Kind is what drives a LED.
type Kind int

const (
	// KindUnset is the zero Spec: nothing configured. Open gives no LED;
	// for the readiness LED, callers use DefaultReadiness instead.
	KindUnset Kind = iota
	// KindNone is no LED, configured explicitly ("none").
	KindNone
	// KindGPIO is an LED on a GPIO pin ("gpio17", "gpio17:active-low").
	KindGPIO
	// KindSysfs is a kernel LED under /sys/class/leds ("sysfs:ACT").
	KindSysfs
	// KindVirtual is an LED without hardware ("virtual").
	KindVirtual
)

// maxPin is the highest BCM GPIO number: the BCM2711 has 58 lines; the
// 40-pin header uses 0-27.
const maxPin = 57

const syntax = "want gpioN, gpioN:active-low, sysfs:NAME, virtual or none"

// Spec says which LED a Light drives. The zero Spec is KindUnset.
type Spec struct {
	Kind Kind
	// Pin is the BCM GPIO number, 0-57 (KindGPIO).
	Pin int
	// ActiveLow: the LED is lit when the pin is low (KindGPIO).
	ActiveLow bool
	// Name is the LED's directory in /sys/class/leds: ACT, PWR, led0...
	// (KindSysfs).
	Name string
}

// Parse reads a Spec from its flag form: "gpio17", "gpio17:active-low",
// "gpio17:active-high", "sysfs:ACT", "virtual" or "none".
func Parse(s string) (Spec, error) {
	spec, err := parse(s)
	if err != nil {
		return Spec{}, fmt.Errorf("hw: led %q: %w", s, err)
	}
	return spec, nil
}

func parse(s string) (Spec, error) {
	switch {
	case s == "":
		return Spec{}, errors.New("empty; " + syntax)
	case s == "none":
		return Spec{Kind: KindNone}, nil
	case s == "virtual":
		return Spec{Kind: KindVirtual}, nil
	case strings.HasPrefix(s, "sysfs:"):
		spec := Spec{Kind: KindSysfs, Name: strings.TrimPrefix(s, "sysfs:")}
		return spec, spec.validate()
	case len(s) > 4 && strings.EqualFold(s[:4], "gpio"):
		num, mode, hasMode := strings.Cut(s[4:], ":")
		pin, err := parsePin(num)
		if err != nil {
			return Spec{}, err
		}
		spec := Spec{Kind: KindGPIO, Pin: pin}
		switch {
		case !hasMode, mode == "active-high":
		case mode == "active-low":
			spec.ActiveLow = true
		default:
			return Spec{}, fmt.Errorf("unknown mode %q; want active-high or active-low", mode)
		}
		return spec, spec.validate()
	}
	return Spec{}, errors.New(syntax)
}

// parsePin reads a BCM GPIO number: decimal digits, no sign, no leading
// zero.
func parsePin(s string) (int, error) {
	bad := s == "" || len(s) > 2 || (len(s) > 1 && s[0] == '0')
	for _, c := range s {
		bad = bad || c < '0' || c > '9'
	}
	if bad {
		return 0, fmt.Errorf("GPIO number %q is not a BCM GPIO number 0-%d; %s", s, maxPin, syntax)
	}
	return strconv.Atoi(s)
}

// validate checks a Spec however it was made.
func (s Spec) validate() error {
	switch s.Kind {
	case KindUnset, KindNone, KindVirtual:
		return nil
	case KindGPIO:
		if s.Pin < 0 || s.Pin > maxPin {
			return fmt.Errorf("GPIO %d out of range 0-%d (BCM numbering)", s.Pin, maxPin)
		}
		return nil
	case KindSysfs:
		if s.Name == "" {
			return errors.New("no LED name; want a directory of /sys/class/leds, as sysfs:ACT")
		}
		if s.Name == "." || s.Name == ".." || strings.ContainsAny(s.Name, "/\x00 \t\n") {
			return fmt.Errorf("LED name %q is not a directory name of /sys/class/leds", s.Name)
		}
		return nil
	}
	return fmt.Errorf("unknown kind %d", int(s.Kind))
}

// String is the flag form Parse reads; empty for KindUnset.
func (s Spec) String() string {
	switch s.Kind {
	case KindUnset:
		return ""
	case KindNone:
		return "none"
	case KindVirtual:
		return "virtual"
	case KindGPIO:
		if s.ActiveLow {
			return fmt.Sprintf("gpio%d:active-low", s.Pin)
		}
		return fmt.Sprintf("gpio%d", s.Pin)
	case KindSysfs:
		return "sysfs:" + s.Name
	}
	return fmt.Sprintf("Kind(%d)", int(s.Kind))
}

// Set parses v into s. With String and Type it makes *Spec a flag value
// (pflag.Value).
func (s *Spec) Set(v string) error {
	spec, err := Parse(v)
	if err != nil {
		return err
	}
	*s = spec
	return nil
}

// Type names a Spec's flag type in help.
func (*Spec) Type() string { return "led" }

// DefaultReadiness is the readiness LED of a board where none is
// configured: the on-board ACT LED (led0 on older kernels) when the board
// has one, else none. sysfsRoot is where sysfs is mounted; empty means
// /sys.
func DefaultReadiness(sysfsRoot string) Spec {
	if sysfsRoot == "" {
		sysfsRoot = "/sys"
	}
	for _, name := range []string{"ACT", "led0"} {
		if fi, err := os.Stat(filepath.Join(sysfsRoot, "class", "leds", name)); err == nil && fi.IsDir() {
			return Spec{Kind: KindSysfs, Name: name}
		}
	}
	return Spec{Kind: KindNone}
}
