// Package led drives a board's two LEDs: readiness (is isle up on this
// board, is the board Ready, is it the Raft leader) and activity (a
// reconcile changed something).
//
// A Light is one LED. Open makes one from a Spec, which Parse reads from a
// flag (--led-ready, --led-activity):
//
//	gpio17              an LED on BCM GPIO 17, lit when the pin is high
//	gpio17:active-low   an LED wired from 3.3 V to the pin, lit when it is low
//	sysfs:ACT           a kernel LED, /sys/class/leds/ACT (PWR, led0, ...): its
//	                    trigger is saved and set to none while isle drives it,
//	                    and restored by Close
//	virtual             no hardware; the Light remembers whether it is lit
//	none                no LED
//
// GPIO pins are found through the GPIO character device (/dev/gpiochip*,
// periph.io/x/host/v3/gpioioctl): BCM GPIO n is line n of the SoC's pin
// controller, the chip labelled pinctrl-* (pinctrl-bcm2835, -bcm2711, or
// -rp1 on a Pi 5). When no readiness LED is configured, DefaultReadiness
// picks the ACT LED every Pi has.
//
// A Board drives the two Lights from one goroutine on an injected Clock:
// writes to hardware happen there only, and its setters never block (the
// latest readiness wins; activity requests are coalesced). Close leaves
// both LEDs off, which is the defined state of a board where isle is not
// running, and gives sysfs LEDs their triggers back; call it on a clean
// exit and on SIGTERM.
//
// # Patterns
//
// A readiness pattern starts the moment the readiness (or leadership)
// changes, with its first phase, so a change shows at once; setting the
// same state again changes nothing.
//
//	readiness          the LED                    timing
//	Off                dark                       isle is not running
//	Starting           slow blink, 1 Hz           500 ms on, 500 ms off
//	NotReady           fast blink, 4 Hz           125 ms on, 125 ms off
//	Ready              solid                      on
//	Ready, leader      solid with a double blink  every 3 s: 150 ms off, 150 ms on,
//	                                              150 ms off, then 2550 ms on
//	Ready, cut off     solid with a long dip      1500 ms on, 500 ms off
//	activity           a flash per change         60 ms on, then at least 60 ms off
//
// The leader's double blink is two short dark gaps in the solid light
// rather than two flashes on a dark one: the light stays on 90% of the
// time, so from across a room a leader still reads as Ready, and two dips
// once every 3 s cannot be taken for the steady 4 Hz of NotReady or the
// 1 Hz of Starting. A Board's leadership shows only while it is Ready.
// A Ready board cut off from the control plane (SetCutOff: it runs its
// pods but reaches no server) shows a long dip every 2 s instead, over
// leadership: on three quarters of the time, slower than any blink.
//
// Activity: a request lights the LED for 60 ms if it is free; the next
// flash starts no sooner than 60 ms after the LED went dark, so a stream of
// requests blinks at about 8 Hz and never looks solid. While the LED is
// busy, up to two flashes are owed, so a burst shows as three flashes;
// requests beyond those are dropped and counted in State.
//
// With nothing to animate the Board still wakes once a second. A write that
// fails is logged once per LED (until one succeeds again), counted in
// State, and retried at the next wake; it never stops the Board.
package led
