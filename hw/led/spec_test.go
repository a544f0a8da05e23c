package led

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
		str  string // String(), if not in
	}{
		{"gpio17", Spec{Kind: KindGPIO, Pin: 17}, ""},
		{"gpio0", Spec{Kind: KindGPIO, Pin: 0}, ""},
		{"gpio57", Spec{Kind: KindGPIO, Pin: 57}, ""},
		{"gpio17:active-low", Spec{Kind: KindGPIO, Pin: 17, ActiveLow: true}, ""},
		{"gpio17:active-high", Spec{Kind: KindGPIO, Pin: 17}, "gpio17"},
		{"GPIO4", Spec{Kind: KindGPIO, Pin: 4}, "gpio4"},
		{"sysfs:ACT", Spec{Kind: KindSysfs, Name: "ACT"}, ""},
		{"sysfs:input0::capslock", Spec{Kind: KindSysfs, Name: "input0::capslock"}, ""},
		{"virtual", Spec{Kind: KindVirtual}, ""},
		{"none", Spec{Kind: KindNone}, ""},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		str := tc.str
		if str == "" {
			str = tc.in
		}
		if got.String() != str {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got.String(), str)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `hw: led "": empty; want gpioN, gpioN:active-low, sysfs:NAME, virtual or none`},
		{"led17", `hw: led "led17": want gpioN`},
		{"gpio", `hw: led "gpio": want gpioN`},
		{"gpio:active-low", `GPIO number "" is not a BCM GPIO number 0-57`},
		{"gpio58", "GPIO 58 out of range 0-57 (BCM numbering)"},
		{"gpio99", "GPIO 99 out of range 0-57"},
		{"gpio170", `GPIO number "170" is not a BCM GPIO number`},
		{"gpio-1", `GPIO number "-1" is not`},
		{"gpio+1", `GPIO number "+1" is not`},
		{"gpio07", `GPIO number "07" is not`},
		{"gpio1x", `GPIO number "1x" is not`},
		{"gpio17:inverted", `hw: led "gpio17:inverted": unknown mode "inverted"; want active-high or active-low`},
		{"gpio17:active-low:x", `unknown mode "active-low:x"`},
		{"sysfs:", `hw: led "sysfs:": no LED name`},
		{"sysfs:..", `LED name ".." is not a directory name`},
		{"sysfs:../../etc", `LED name "../../etc" is not`},
		{"sysfs:a b", `LED name "a b" is not`},
		{"NONE", `hw: led "NONE": want gpioN`},
	} {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %q, want it to say %q", tc.in, err, tc.want)
		}
	}
}

func TestSpecFlagValue(t *testing.T) {
	var s Spec
	if s.String() != "" || s.Kind != KindUnset {
		t.Errorf("zero Spec = %q, kind %d; want unset", s.String(), s.Kind)
	}
	if err := s.Set("gpio22:active-low"); err != nil {
		t.Fatal(err)
	}
	if s != (Spec{Kind: KindGPIO, Pin: 22, ActiveLow: true}) || s.Type() != "led" {
		t.Errorf("after Set: %+v, type %q", s, s.Type())
	}
	if err := s.Set("gpio99"); err == nil {
		t.Error("Set(gpio99) succeeded")
	}
	if s.Pin != 22 {
		t.Errorf("a failed Set changed the Spec: %+v", s)
	}
}

func TestOpenValidates(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: KindGPIO, Pin: 60}, "hw: led gpio60: GPIO 60 out of range"},
		{Spec{Kind: KindGPIO, Pin: -1}, "out of range"},
		{Spec{Kind: KindSysfs, Name: "a/b"}, `hw: led sysfs:a/b: LED name "a/b"`},
		{Spec{Kind: Kind(9)}, "hw: led Kind(9): unknown kind 9"},
	} {
		l, err := Open(tc.spec, WithSysfs(t.TempDir()))
		if err == nil {
			l.Close()
			t.Errorf("Open(%+v) succeeded", tc.spec)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v) = %q, want it to say %q", tc.spec, err, tc.want)
		}
	}
}

func TestOpenNoneAndVirtual(t *testing.T) {
	for _, spec := range []Spec{{}, {Kind: KindNone}} {
		l, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Set(true); err != nil {
			t.Errorf("%q: Set: %v", spec, err)
		}
		if err := l.Close(); err != nil {
			t.Errorf("%q: Close: %v", spec, err)
		}
	}
	l, err := Open(Spec{Kind: KindVirtual})
	if err != nil {
		t.Fatal(err)
	}
	v := l.(*Virtual)
	if v.Lit() {
		t.Error("a new Virtual is lit")
	}
	v.Set(true)
	if !v.Lit() {
		t.Error("Virtual not lit after Set(true)")
	}
	v.Close()
	if v.Lit() {
		t.Error("Virtual lit after Close")
	}
}
