package led

import (
	"fmt"
	"sync"

	"periph.io/x/conn/v3/gpio"
)

// A Light is one LED, on or off. Its methods are called from one goroutine
// at a time (a Board's).
type Light interface {
	// Set lights the LED or puts it out.
	Set(on bool) error
	// Close puts the LED out and gives it back: a sysfs LED gets its kernel
	// trigger again. The Light is not used after.
	Close() error
}

// An Option changes how Open finds LEDs.
type Option func(*options)

type options struct {
	sysfs string
	pins  func(bcm int) (gpio.PinOut, error)
}

// WithSysfs makes Open look for sysfs LEDs under root/class/leds instead
// of /sys/class/leds.
func WithSysfs(root string) Option {
	return func(o *options) { o.sysfs = root }
}

// WithPins makes Open find GPIO pins by BCM number with lookup instead of
// the GPIO character device; tests give it periph's gpiotest pins.
func WithPins(lookup func(bcm int) (gpio.PinOut, error)) Option {
	return func(o *options) { o.pins = lookup }
}

// Open opens the Light spec names, off. KindUnset and KindNone give a Light
// that does nothing; KindVirtual gives a *Virtual.
func Open(spec Spec, opts ...Option) (Light, error) {
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("hw: led %s: %w", spec, err)
	}
	o := options{sysfs: "/sys", pins: chipPin}
	for _, opt := range opts {
		opt(&o)
	}
	switch spec.Kind {
	case KindGPIO:
		return openGPIO(spec, o.pins)
	case KindSysfs:
		return openSysfs(spec, o.sysfs)
	case KindVirtual:
		return &Virtual{}, nil
	}
	return noLight{}, nil
}

// noLight is the Light of a board without that LED.
type noLight struct{}

func (noLight) Set(bool) error { return nil }
func (noLight) Close() error   { return nil }

// Virtual is a Light without hardware that remembers whether it is lit:
// the island's simulated boards use it, and so can a board whose LEDs
// only `isle status` shows.
type Virtual struct {
	mu  sync.Mutex
	lit bool
}

var _ Light = (*Virtual)(nil)

// Set records the LED's state.
func (v *Virtual) Set(on bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lit = on
	return nil
}

// Close puts the LED out.
func (v *Virtual) Close() error { return v.Set(false) }

// Lit tells whether the LED is lit.
func (v *Virtual) Lit() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lit
}
