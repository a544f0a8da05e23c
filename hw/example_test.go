package hw_test

import (
	"fmt"

	"github.com/isle-cluster/isle/hw"
)

func ExampleModelLabel() {
	fmt.Println(hw.LabelBoardModel + "=" + hw.ModelLabel("Raspberry Pi 4 Model B Rev 1.4"))
	// Output: isle.dev/board-model=raspberry-pi-4-model-b-rev-1.4
}

// A Pi 3 on a phone charger: its supply sagged under load, but not now.
func ExampleThrottling_Conditions() {
	t := hw.Throttling{UnderVoltageOccurred: true, ThrottledOccurred: true, Raw: 0x50000}
	fmt.Println(t)
	for _, c := range t.Conditions() {
		fmt.Println(c.Type, c.Status, c.Reason)
	}
	// Output:
	// under-voltage and throttled since boot
	// UnderVoltage False UnderVoltageSinceBoot
	// Throttled False ThrottledSinceBoot
}
