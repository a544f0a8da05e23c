package led

import (
	"errors"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"
)

func TestGPIOActiveHighAndLow(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		off, lit gpio.Level
	}{
		{"gpio17", gpio.Low, gpio.High},
		{"gpio17:active-low", gpio.High, gpio.Low},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			pin := &gpiotest.Pin{N: "GPIO17", Num: 17, L: tc.lit}
			spec, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			var asked int
			l, err := Open(spec, WithPins(func(n int) (gpio.PinOut, error) { asked = n; return pin, nil }))
			if err != nil {
				t.Fatal(err)
			}
			if asked != 17 {
				t.Errorf("looked up GPIO %d, want 17", asked)
			}
			if pin.Read() != tc.off {
				t.Errorf("after Open the pin is %s, want %s (off)", pin.Read(), tc.off)
			}
			l.Set(true)
			if pin.Read() != tc.lit {
				t.Errorf("lit, the pin is %s, want %s", pin.Read(), tc.lit)
			}
			l.Set(false)
			if pin.Read() != tc.off {
				t.Errorf("dark, the pin is %s, want %s", pin.Read(), tc.off)
			}
			l.Set(true)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if pin.Read() != tc.off {
				t.Errorf("after Close the pin is %s, want %s (off)", pin.Read(), tc.off)
			}
		})
	}
}

// brokenPin is a gpiotest.Pin that cannot be driven.
type brokenPin struct{ gpiotest.Pin }

func (*brokenPin) Out(gpio.Level) error { return errors.New("line busy") }

func TestGPIOErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lookup func(int) (gpio.PinOut, error)
		want   string
	}{
		{"lookup fails", func(int) (gpio.PinOut, error) { return nil, errors.New("no pin controller") },
			"hw: led gpio5:active-low: no pin controller"},
		{"no pin", func(int) (gpio.PinOut, error) { return nil, nil }, "hw: led gpio5:active-low: no such pin"},
		{"pin cannot be driven", func(int) (gpio.PinOut, error) { return &brokenPin{gpiotest.Pin{N: "GPIO5", Num: 5}}, nil },
			"hw: led gpio5:active-low: GPIO5(5): line busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(Spec{Kind: KindGPIO, Pin: 5, ActiveLow: true}, WithPins(tc.lookup))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestBoardActiveLow(t *testing.T) {
	clk := newStepClock(t)
	pin := newRecPin(clk, 17)
	l, err := Open(Spec{Kind: KindGPIO, Pin: 17, ActiveLow: true}, WithPins(func(int) (gpio.PinOut, error) { return pin, nil }))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, clk, l, nil)
	r.do(func(b *Board) { b.SetReadiness(NotReady) })
	r.clk.advance(300 * time.Millisecond)
	r.b.Close()
	wantEdges(t, "readiness", pin.edgeStrings(), []string{
		"0s High", "0s Low", "125ms High", "250ms Low", "300ms High",
	})
}
