package gossip

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
	"sync"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	undecryptable prometheus.Counter
	conflicts     prometheus.Counter
}

// Bytes on the wire, counted by memberlist through go-metrics, whose sink
// is one per process: these count every member of the process.
var (
	wireOnce  sync.Once
	wireBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "isle_gossip_bytes_total", Help: "Gossip bytes on the wire by direction and protocol (TCP received is not counted by memberlist)."},
		[]string{"direction", "proto"})
)

func newMetrics(reg prometheus.Registerer, g *Gossip) *metrics {
	m := &metrics{
		undecryptable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_gossip_undecryptable_total", Help: "Gossip packets and streams dropped because they were not encrypted with this cluster's key."}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_gossip_name_conflicts_total", Help: "Boards that claimed the name of another alive board."}),
	}
	wireOnce.Do(func() {
		conf := gometrics.DefaultConfig("")
		conf.EnableHostname, conf.EnableRuntimeMetrics, conf.EnableTypePrefix = false, false, false
		_, _ = gometrics.NewGlobal(conf, wireSink{})
	})
	if reg != nil {
		members := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "isle_gossip_members", Help: "Boards this board's gossip knows, by state."}, []string{"state"})
		reg.MustRegister(m.undecryptable, m.conflicts, wireBytes, gaugeFunc{members, g})
	}
	return m
}

// gaugeFunc fills the members gauge at scrape time.
type gaugeFunc struct {
	v *prometheus.GaugeVec
	g *Gossip
}

func (f gaugeFunc) Describe(ch chan<- *prometheus.Desc) { f.v.Describe(ch) }
func (f gaugeFunc) Collect(ch chan<- prometheus.Metric) {
	f.v.Reset()
	for _, st := range []State{Alive, Suspect, Dead, Left} {
		f.v.WithLabelValues(string(st))
	}
	for _, m := range f.g.Members() {
		f.v.WithLabelValues(string(m.State)).Inc()
	}
	f.v.Collect(ch)
}

// wireSink keeps memberlist's byte counters and drops its other metrics.
type wireSink struct{}

func (wireSink) IncrCounterWithLabels(key []string, val float32, _ []gometrics.Label) {
	if len(key) == 3 && key[0] == "memberlist" && (key[1] == "udp" || key[1] == "tcp") && (key[2] == "sent" || key[2] == "received") {
		wireBytes.WithLabelValues(key[2], key[1]).Add(float64(val))
	}
}
func (s wireSink) IncrCounter(key []string, val float32)                          { s.IncrCounterWithLabels(key, val, nil) }
func (wireSink) SetGauge([]string, float32)                                       {}
func (wireSink) SetGaugeWithLabels([]string, float32, []gometrics.Label)          {}
func (wireSink) EmitKey([]string, float32)                                        {}
func (wireSink) AddSample([]string, float32)                                      {}
func (wireSink) AddSampleWithLabels([]string, float32, []gometrics.Label)         {}
func (wireSink) SetPrecisionGauge([]string, float64)                              {}
func (wireSink) SetPrecisionGaugeWithLabels([]string, float64, []gometrics.Label) {}

// newMemberlistLogger turns memberlist's "[LEVEL] memberlist: text" lines
// into slog records, and counts the ones that mean a packet or stream was
// not encrypted with this cluster's key: memberlist has no other hook for
// them.
func newMemberlistLogger(l *slog.Logger, m *metrics) *log.Logger {
	return log.New(&mlWriter{log: l, m: m}, "", 0)
}

type mlWriter struct {
	log *slog.Logger
	m   *metrics
}

// undecryptableMarks, in lower case, are the parts of memberlist's log
// lines about traffic not encrypted with this cluster's key.
var undecryptableMarks = []string{
	"decrypt packet failed",
	"no installed keys could decrypt",
	"encryption is configured but remote state is not encrypted",
	"message authentication failed",
}

func (w *mlWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level := slog.LevelDebug
	switch {
	case strings.HasPrefix(line, "[ERR]"):
		level = slog.LevelWarn
	case strings.HasPrefix(line, "[WARN]"):
		level = slog.LevelInfo
	}
	if i := strings.Index(line, "memberlist: "); i >= 0 {
		line = line[i+len("memberlist: "):]
	}
	lower := strings.ToLower(line)
	for _, mark := range undecryptableMarks {
		if strings.Contains(lower, mark) {
			w.m.undecryptable.Inc()
			level = slog.LevelDebug // counted; a stranger's traffic must not flood the log
			break
		}
	}
	w.log.Log(context.Background(), level, "gossip: "+line)
	return len(p), nil
}
