package agent

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/hw/led"
)

// boardCollector reports the board's facts and LEDs on /metrics, read at
// each scrape: the SoC temperature, the firmware's power report, and what
// the LEDs show.
type boardCollector struct {
	root string     // where the board's /sys and /proc are: "/"
	leds *led.Board // nil: no LED metrics
	log  *slog.Logger

	info, temperature, power, pattern, flashes *prometheus.Desc
}

func newBoardCollector(root string, leds *led.Board, log *slog.Logger) *boardCollector {
	return &boardCollector{
		root: root, leds: leds, log: log,
		info: prometheus.NewDesc("isle_board_info", "The board's model and serial number (from its device tree), always 1.",
			[]string{"model", "serial"}, nil),
		temperature: prometheus.NewDesc("isle_board_temperature_celsius", "The SoC's temperature, from the kernel's thermal zone.", nil, nil),
		power: prometheus.NewDesc("isle_board_power_condition", "1 while the firmware reports the condition now (UnderVoltage, Throttled), else 0.",
			[]string{"condition"}, nil),
		pattern: prometheus.NewDesc("isle_led_readiness", "1 for the pattern the readiness LED shows (off, slow-blink, fast-blink, solid-dip, solid, solid-leader).",
			[]string{"pattern"}, nil),
		flashes: prometheus.NewDesc("isle_led_activity_flashes_total", "Flashes of the activity LED, one per reconcile that changed something (bursts coalesced).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *boardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.temperature, c.power, c.pattern, c.flashes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *boardCollector) Collect(ch chan<- prometheus.Metric) {
	b, err := hw.ReadBoard(c.root)
	if err != nil {
		c.log.Debug("agent: board facts for /metrics", "err", err)
	}
	if b.Model != "" || b.Serial != "" {
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, b.Model, b.Serial)
	}
	if b.HasTemperature {
		ch <- prometheus.MustNewConstMetric(c.temperature, prometheus.GaugeValue, float64(b.MilliCelsius)/1000)
	}
	if b.HasThrottling {
		for _, cond := range b.Throttling.Conditions() {
			v := 0.0
			if cond.Status == "True" {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.power, prometheus.GaugeValue, v, cond.Type)
		}
	}
	if c.leds != nil {
		st := c.leds.State()
		for _, p := range led.Patterns {
			v := 0.0
			if p == st.Pattern() {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.pattern, prometheus.GaugeValue, v, p)
		}
		ch <- prometheus.MustNewConstMetric(c.flashes, prometheus.CounterValue, float64(st.Flashes))
	}
}
