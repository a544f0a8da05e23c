package benchkit

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Scrape returns the samples of one Prometheus /metrics page, keyed by
// series: the metric name, with its labels as written ("name{a=\"b\"}")
// for labelled ones.
func Scrape(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	vals := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndex(line, "} ")
		if i < 0 {
			i = strings.Index(line, " ")
		} else {
			i++
		}
		if i < 0 {
			continue
		}
		name, v := line[:i], line[i+1:]
		if f, err := strconv.ParseFloat(strings.Fields(v)[0], 64); err == nil {
			vals[name] = f
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return vals, nil
}

// Sum adds up every series of the metric name in vals.
func Sum(vals map[string]float64, name string) float64 {
	var sum float64
	for series, v := range vals {
		if series == name || strings.HasPrefix(series, name+"{") {
			sum += v
		}
	}
	return sum
}
