package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/isle-cluster/isle/hw/led"
)

func TestBoardMetrics(t *testing.T) {
	root := t.TempDir()
	for path, body := range map[string]string{
		"proc/device-tree/model":                              "Raspberry Pi 4 Model B Rev 1.4\x00",
		"proc/device-tree/serial-number":                      "10000000d94a609b\x00",
		"sys/class/thermal/thermal_zone0/type":                "cpu-thermal\n",
		"sys/class/thermal/thermal_zone0/temp":                "61342\n",
		"sys/devices/platform/soc/soc:firmware/get_throttled": "50005\n", // under-voltage and throttled now
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := led.NewBoard(&led.Virtual{}, nil, nil, slog.New(slog.DiscardHandler))
	defer b.Close()
	b.SetReadiness(led.NotReady)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newBoardCollector(root, b, slog.New(slog.DiscardHandler))); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP isle_board_info The board's model and serial number (from its device tree), always 1.
# TYPE isle_board_info gauge
isle_board_info{model="Raspberry Pi 4 Model B Rev 1.4",serial="10000000d94a609b"} 1
# HELP isle_board_power_condition 1 while the firmware reports the condition now (UnderVoltage, Throttled), else 0.
# TYPE isle_board_power_condition gauge
isle_board_power_condition{condition="Throttled"} 1
isle_board_power_condition{condition="UnderVoltage"} 1
# HELP isle_board_temperature_celsius The SoC's temperature, from the kernel's thermal zone.
# TYPE isle_board_temperature_celsius gauge
isle_board_temperature_celsius 61.342
# HELP isle_led_readiness 1 for the pattern the readiness LED shows (off, slow-blink, fast-blink, solid-dip, solid, solid-leader).
# TYPE isle_led_readiness gauge
isle_led_readiness{pattern="fast-blink"} 1
isle_led_readiness{pattern="off"} 0
isle_led_readiness{pattern="slow-blink"} 0
isle_led_readiness{pattern="solid"} 0
isle_led_readiness{pattern="solid-dip"} 0
isle_led_readiness{pattern="solid-leader"} 0
`
	// The Board takes SetReadiness in its own goroutine: wait for it.
	for deadline := time.Now().Add(5 * time.Second); b.State().Readiness != led.NotReady; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Board did not take NotReady: %+v", b.State())
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"isle_board_info", "isle_board_power_condition", "isle_board_temperature_celsius", "isle_led_readiness"); err != nil {
		t.Error(err)
	}

	// A machine with none of those files reports no board metrics.
	reg = prometheus.NewPedanticRegistry()
	if err := reg.Register(newBoardCollector(t.TempDir(), nil, slog.New(slog.DiscardHandler))); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("a machine without board facts: %d series (%v), want none", n, err)
	}
}
