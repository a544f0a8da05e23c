package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := options{isle: "out/isle", dir: "/tmp/isle-trafficbench", trials: 5, duration: 5 * time.Second, conns: 16, dnsClients: 8}
	if o != want {
		t.Errorf("defaults: %+v, want %+v", o, want)
	}
	o, err = parse([]string{"-dir", "rel", "-conns", "4", "-dns-clients", "2", "-trials", "1", "-duration", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(o.dir) || filepath.Base(o.dir) != "rel" || o.conns != 4 || o.dnsClients != 2 || o.trials != 1 || o.duration != time.Second {
		t.Errorf("parsed %+v", o)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-trials", "0"}, "-trials 0"},
		{[]string{"-duration", "10ms"}, "-duration 10ms"},
		{[]string{"-conns", "0"}, "-conns 0: want 1 to 1024"},
		{[]string{"-conns", "5000"}, "-conns 5000"},
		{[]string{"-dns-clients", "0"}, "-dns-clients 0"},
		{[]string{"-dir", ""}, "-dir"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-no-such-flag"}, "not defined"},
	} {
		if _, err := parse(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
