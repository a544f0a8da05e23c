package benchkit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestScrape(t *testing.T) {
	page := `# HELP isle_x A counter.
# TYPE isle_x counter
isle_x 3
isle_bytes_total{direction="sent",proto="udp"} 1.5e+03
isle_bytes_total{direction="received",proto="udp"} 500
isle_weird{path="a b} c"} 7
`
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(page)) }))
	defer s.Close()
	vals, err := Scrape(context.Background(), s.Client(), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if vals["isle_x"] != 3 || Sum(vals, "isle_bytes_total") != 2000 || vals[`isle_weird{path="a b} c"}`] != 7 {
		t.Fatalf("scraped %v", vals)
	}
	if Sum(vals, "isle") != 0 {
		t.Fatal("Sum matched a name prefix")
	}
}
