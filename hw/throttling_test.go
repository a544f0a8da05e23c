package hw

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseThrottled(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Throttling
		str  string
	}{
		{"0\n", Throttling{}, "no under-voltage or throttling since boot"},
		{"0x0", Throttling{}, "no under-voltage or throttling since boot"},
		{"50000\n", Throttling{UnderVoltageOccurred: true, ThrottledOccurred: true, Raw: 0x50000},
			"under-voltage and throttled since boot"},
		{"0x50005", Throttling{UnderVoltage: true, Throttled: true, UnderVoltageOccurred: true, ThrottledOccurred: true, Raw: 0x50005},
			"under-voltage and throttled now"},
		{"50001\n", Throttling{UnderVoltage: true, UnderVoltageOccurred: true, ThrottledOccurred: true, Raw: 0x50001},
			"under-voltage now; throttled since boot"},
		{"80008\n", Throttling{SoftTempLimit: true, SoftTempLimitOccurred: true, Raw: 0x80008}, "soft temperature limit reached now"},
		{"0XE0000", Throttling{ArmFreqCappedOccurred: true, ThrottledOccurred: true, SoftTempLimitOccurred: true, Raw: 0xe0000},
			"ARM frequency capped, throttled and soft temperature limit reached since boot"},
		{"f000f", Throttling{UnderVoltage: true, ArmFreqCapped: true, Throttled: true, SoftTempLimit: true,
			UnderVoltageOccurred: true, ArmFreqCappedOccurred: true, ThrottledOccurred: true, SoftTempLimitOccurred: true, Raw: 0xf000f},
			"under-voltage, ARM frequency capped, throttled and soft temperature limit reached now"},
		// Bits the firmware may add later are kept in Raw only.
		{"100000\n", Throttling{Raw: 0x100000}, "no under-voltage or throttling since boot"},
	} {
		got, err := parseThrottled(tc.text)
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
		if s := got.String(); s != tc.str {
			t.Errorf("%q: String %q, want %q", tc.text, s, tc.str)
		}
	}
	for _, bad := range []string{"", "\n", "0x", "zz", "-1", "+5", "0x+5", "0x0x5", "1ffffffff", "50005 junk", "throttled=0x50005"} {
		if got, err := parseThrottled(bad); err == nil {
			t.Errorf("%q accepted: %+v", bad, got)
		} else if !strings.Contains(err.Error(), "is not a hexadecimal bitmask") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// Without get_throttled only the UnderVoltage condition is known.
func TestConditionsUnderVoltageOnly(t *testing.T) {
	for _, tc := range []struct {
		under                bool
		status, reason, text string
	}{
		{true, "True", "UnderVoltage", "under-voltage now"},
		{false, "False", "SupplyVoltageOK", "no under-voltage now"},
	} {
		th := Throttling{UnderVoltage: tc.under, UnderVoltageOnly: true}
		if s := th.String(); s != tc.text {
			t.Errorf("%+v: String %q, want %q", th, s, tc.text)
		}
		cs := th.Conditions()
		if len(cs) != 1 || cs[0].Type != ConditionUnderVoltage || cs[0].Status != tc.status || cs[0].Reason != tc.reason {
			t.Fatalf("%+v: conditions %+v: want only UnderVoltage %s/%s", th, cs, tc.status, tc.reason)
		}
		if strings.Contains(cs[0].Message, "get_throttled") || strings.Contains(cs[0].Message, "since boot") {
			t.Errorf("message speaks of what the alarm does not say: %s", cs[0].Message)
		}
	}
}

func TestConditions(t *testing.T) {
	type cond struct{ status, reason string }
	for _, tc := range []struct {
		raw          uint32
		under, thr   cond
		underMessage []string
		thrMessage   []string
	}{
		{
			raw: 0, under: cond{"False", "SupplyVoltageOK"}, thr: cond{"False", "NotThrottled"},
			underMessage: []string{"no under-voltage since boot"}, thrMessage: []string{"not throttled since boot"},
		},
		{
			raw: 0x50005, under: cond{"True", "UnderVoltage"}, thr: cond{"True", "Throttled"},
			underMessage: []string{"below the board's limit now", "get_throttled 0x50005: under-voltage and throttled now", "5.1 V"},
			thrMessage:   []string{"slows the CPU now", "see the UnderVoltage condition"},
		},
		{
			raw: 0x50000, under: cond{"False", "UnderVoltageSinceBoot"}, thr: cond{"False", "ThrottledSinceBoot"},
			underMessage: []string{"fine now", "since boot", "0x50000", "short, thick cable"},
			thrMessage:   []string{"not slowed now", "since boot", "under-voltage (see the UnderVoltage condition) or heat"},
		},
		{
			raw: 0x80008, under: cond{"False", "SupplyVoltageOK"}, thr: cond{"True", "SoftTemperatureLimit"},
			thrMessage: []string{"soft temperature limit reached now", "heatsink"},
		},
		{
			raw: 0x20002, under: cond{"False", "SupplyVoltageOK"}, thr: cond{"True", "ArmFrequencyCapped"},
			thrMessage: []string{"ARM frequency capped now", "the SoC is hot"},
		},
		{
			raw: 0x10001, under: cond{"True", "UnderVoltage"}, thr: cond{"False", "NotThrottled"},
		},
	} {
		th, err := parseThrottled(fmt.Sprintf("%x\n", tc.raw)) // as the kernel prints it
		if err != nil {
			t.Fatal(err)
		}
		cs := th.Conditions()
		if len(cs) != 2 || cs[0].Type != ConditionUnderVoltage || cs[1].Type != ConditionThrottled {
			t.Fatalf("0x%x: conditions %+v: want UnderVoltage and Throttled", tc.raw, cs)
		}
		for i, want := range []struct {
			cond
			message []string
		}{{tc.under, tc.underMessage}, {tc.thr, tc.thrMessage}} {
			c := cs[i]
			if c.Status != want.status || c.Reason != want.reason {
				t.Errorf("0x%x: %s %s/%s, want %s/%s", tc.raw, c.Type, c.Status, c.Reason, want.status, want.reason)
			}
			for _, m := range want.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("0x%x: %s message lacks %q: %s", tc.raw, c.Type, m, c.Message)
				}
			}
		}
	}
}
