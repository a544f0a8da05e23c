package led_test

import (
	"fmt"
	"log"

	"github.com/isle-cluster/isle/hw/led"
)

func ExampleParse() {
	for _, flag := range []string{"gpio17:active-low", "sysfs:ACT", "gpio64"} {
		spec, err := led.Parse(flag)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: pin %d, active-low %t, name %q\n", spec, spec.Pin, spec.ActiveLow, spec.Name)
	}
	// Output:
	// gpio17:active-low: pin 17, active-low true, name ""
	// sysfs:ACT: pin 0, active-low false, name "ACT"
	// hw: led "gpio64": GPIO 64 out of range 0-57 (BCM numbering)
}

func ExampleBoard() {
	ready, err := led.Open(led.Spec{Kind: led.KindVirtual})
	if err != nil {
		log.Fatal(err)
	}
	b := led.NewBoard(ready, nil, nil, nil) // the real clock, slog.Default()
	b.SetReadiness(led.Starting)
	// ... joined, node Ready, elected leader:
	b.SetReadiness(led.Ready)
	b.SetLeader(true)
	b.Activity() // a reconcile changed something
	if err := b.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.State().Readiness, ready.(*led.Virtual).Lit())
	// Output: off false
}
