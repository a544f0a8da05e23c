package hw

import (
	"fmt"
	"strconv"
	"strings"
)

// Throttling is the Raspberry Pi firmware's get_throttled bitmask: what
// limits the board now, and what has since boot. The firmware clears the
// "now" bits when the cause goes away and keeps the "since boot" ones,
// unless a reader asks it to clear them: the kernel's rpi_volt hardware
// monitor asks every 2 s, so where it runs "since boot" may mean
// "lately".
//
// Kernels from 2025 on no longer have get_throttled; they have the
// hardware monitor's under-voltage alarm only, and then UnderVoltageOnly
// is set, UnderVoltage is the alarm and every other field is false.
type Throttling struct {
	// Now.
	UnderVoltage  bool // bit 0: the supply voltage is below its limit (about 4.63 V)
	ArmFreqCapped bool // bit 1: the ARM cores' frequency is capped
	Throttled     bool // bit 2: the cores run slower than asked
	SoftTempLimit bool // bit 3: the soft temperature limit is reached
	// Since boot.
	UnderVoltageOccurred  bool // bit 16
	ArmFreqCappedOccurred bool // bit 17
	ThrottledOccurred     bool // bit 18
	SoftTempLimitOccurred bool // bit 19
	// Raw is the whole bitmask, for messages.
	Raw uint32
	// UnderVoltageOnly says that only UnderVoltage is known.
	UnderVoltageOnly bool
}

// parseThrottled parses get_throttled: hexadecimal, as the kernel prints
// it ("50005") or vcgencmd does ("0x50005").
func parseThrottled(s string) (Throttling, error) {
	text := strings.TrimSpace(s)
	digits := text
	if len(text) > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X') {
		digits = text[2:]
	}
	v, err := strconv.ParseUint(digits, 16, 32)
	if err != nil {
		return Throttling{}, fmt.Errorf("%q is not a hexadecimal bitmask of 32 bits", text)
	}
	bit := func(n uint) bool { return v&(1<<n) != 0 }
	return Throttling{
		UnderVoltage: bit(0), ArmFreqCapped: bit(1), Throttled: bit(2), SoftTempLimit: bit(3),
		UnderVoltageOccurred: bit(16), ArmFreqCappedOccurred: bit(17), ThrottledOccurred: bit(18), SoftTempLimitOccurred: bit(19),
		Raw: uint32(v),
	}, nil
}

// String says what limits the board now and what did since boot, such as
// "under-voltage now; throttled since boot". What is on now is not
// repeated as since boot.
func (t Throttling) String() string {
	if t.UnderVoltageOnly {
		if t.UnderVoltage {
			return "under-voltage now"
		}
		return "no under-voltage now"
	}
	var now, before []string
	for _, f := range []struct {
		name            string
		isNow, occurred bool
	}{
		{"under-voltage", t.UnderVoltage, t.UnderVoltageOccurred},
		{"ARM frequency capped", t.ArmFreqCapped, t.ArmFreqCappedOccurred},
		{"throttled", t.Throttled, t.ThrottledOccurred},
		{"soft temperature limit reached", t.SoftTempLimit, t.SoftTempLimitOccurred},
	} {
		switch {
		case f.isNow:
			now = append(now, f.name)
		case f.occurred:
			before = append(before, f.name)
		}
	}
	var parts []string
	if len(now) > 0 {
		parts = append(parts, andList(now)+" now")
	}
	if len(before) > 0 {
		parts = append(parts, andList(before)+" since boot")
	}
	if len(parts) == 0 {
		return "no under-voltage or throttling since boot"
	}
	return strings.Join(parts, "; ")
}

// andList joins "a", "b", "c" as "a, b and c".
func andList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// Node condition types of a board with Raspberry Pi firmware.
const (
	// ConditionUnderVoltage is True while the supply voltage is below the
	// board's limit: the most common hidden cause of flaky Pi clusters (SD
	// card corruption, USB resets, crashes under load).
	ConditionUnderVoltage = "UnderVoltage"
	// ConditionThrottled is True while the firmware slows the ARM cores
	// (throttled, frequency capped or at the soft temperature limit).
	ConditionThrottled = "Throttled"
)

// Condition is a Node condition in plain strings, for the agent to map to
// its API type: Status is "True" or "False"; Reason is one CamelCase word
// that changes whenever the state does (an event is worth sending then).
type Condition struct {
	Type, Status, Reason, Message string
}

// powerAdvice is what to do about under-voltage.
const powerAdvice = "use a 5.1 V supply rated for the board (2.5 A for a Pi 3 or Zero 2 W, 3 A for a Pi 4, " +
	"5 A for a Pi 5) and a short, thick cable, and power USB disks from a powered hub"

// Conditions are the UnderVoltage and Throttled conditions that t gives:
// UnderVoltage alone when t is UnderVoltageOnly; none on a board without
// the firmware's report (Board.HasThrottling false).
func (t Throttling) Conditions() []Condition {
	if t.UnderVoltageOnly {
		c := Condition{Type: ConditionUnderVoltage, Status: "False", Reason: "SupplyVoltageOK", Message: "no under-voltage now"}
		if t.UnderVoltage {
			c.Status, c.Reason = "True", "UnderVoltage"
			c.Message = "the supply voltage is below the board's limit now (the rpi_volt hardware monitor's alarm), " +
				"which corrupts SD cards and crashes boards under load: " + powerAdvice
		}
		return []Condition{c}
	}
	return []Condition{t.underVoltage(), t.throttled()}
}

// report is get_throttled as messages quote it.
func (t Throttling) report() string { return fmt.Sprintf("get_throttled 0x%x: %s", t.Raw, t) }

func (t Throttling) underVoltage() Condition {
	c := Condition{Type: ConditionUnderVoltage, Status: "False", Reason: "SupplyVoltageOK", Message: "no under-voltage since boot"}
	switch {
	case t.UnderVoltage:
		c.Status, c.Reason = "True", "UnderVoltage"
		c.Message = fmt.Sprintf("the supply voltage is below the board's limit now (%s), which corrupts SD cards and "+
			"crashes boards under load: %s", t.report(), powerAdvice)
	case t.UnderVoltageOccurred:
		c.Reason = "UnderVoltageSinceBoot"
		c.Message = fmt.Sprintf("the supply voltage is fine now but has been below the board's limit since boot (%s): "+
			"the supply sags under load; %s", t.report(), powerAdvice)
	}
	return c
}

func (t Throttling) throttled() Condition {
	c := Condition{Type: ConditionThrottled, Status: "False", Reason: "NotThrottled", Message: "not throttled since boot"}
	const heat = "give the board a heatsink or a fan and room to breathe"
	cause := "the SoC is hot: " + heat
	switch {
	case t.UnderVoltage:
		cause = "under-voltage slows it: see the UnderVoltage condition"
	case t.UnderVoltageOccurred:
		cause = "the cause is under-voltage (see the UnderVoltage condition) or heat: " + heat
	}
	switch {
	case t.Throttled || t.ArmFreqCapped || t.SoftTempLimit:
		c.Status = "True"
		switch {
		case t.Throttled:
			c.Reason = "Throttled"
		case t.ArmFreqCapped:
			c.Reason = "ArmFrequencyCapped"
		default:
			c.Reason = "SoftTemperatureLimit"
		}
		c.Message = fmt.Sprintf("the firmware slows the CPU now (%s); %s", t.report(), cause)
	case t.ThrottledOccurred || t.ArmFreqCappedOccurred || t.SoftTempLimitOccurred:
		c.Reason = "ThrottledSinceBoot"
		c.Message = fmt.Sprintf("not slowed now, but the firmware has slowed the CPU since boot (%s); %s", t.report(), cause)
	}
	return c
}
