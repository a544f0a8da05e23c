package led

import (
	"errors"
	"fmt"
	"strings"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/host/v3/gpioioctl"
)

// gpioLight is an LED on a GPIO pin.
type gpioLight struct {
	spec Spec
	pin  gpio.PinOut
}

func openGPIO(spec Spec, lookup func(bcm int) (gpio.PinOut, error)) (Light, error) {
	pin, err := lookup(spec.Pin)
	if err == nil && pin == nil {
		err = errors.New("no such pin")
	}
	if err != nil {
		return nil, fmt.Errorf("hw: led %s: %w", spec, err)
	}
	l := &gpioLight{spec: spec, pin: pin}
	// The first write makes the pin an output and claims it: a pin that
	// cannot be driven fails here rather than at the first blink.
	if err := l.Set(false); err != nil {
		return nil, err
	}
	return l, nil
}

// Set drives the pin: high to light the LED, or low when it is active-low.
func (l *gpioLight) Set(on bool) error {
	if err := l.pin.Out(gpio.Level(on != l.spec.ActiveLow)); err != nil {
		return fmt.Errorf("hw: led %s: %s: %w", l.spec, l.pin, err)
	}
	return nil
}

// Close puts the LED out. The line stays requested until the process
// exits.
func (l *gpioLight) Close() error { return l.Set(false) }

// chipPin finds BCM GPIO n through the GPIO character device: line n of
// the first chip labelled pinctrl-*, the SoC's pin controller
// (pinctrl-bcm2835, pinctrl-bcm2711, or pinctrl-rp1 on a Pi 5; gpioioctl
// lists those first). It loads the GPIO drivers linked in, which are
// gpioioctl's only, on first use.
func chipPin(n int) (gpio.PinOut, error) {
	if _, err := driverreg.Init(); err != nil {
		return nil, fmt.Errorf("loading GPIO drivers: %w", err)
	}
	for _, chip := range gpioioctl.Chips {
		if !strings.HasPrefix(chip.Label(), "pinctrl-") {
			continue
		}
		if n >= chip.LineCount() {
			return nil, fmt.Errorf("%s (%s) has no line %d", chip.Path(), chip.Label(), n)
		}
		return chip.ByNumber(n), nil
	}
	return nil, errors.New("no pin controller (a GPIO chip labelled pinctrl-*) among /dev/gpiochip*: not a Raspberry Pi, or no access to /dev/gpiochip*")
}
