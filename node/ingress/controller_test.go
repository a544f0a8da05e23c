package ingress

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string // "" for none
	}{
		{"defaults", Config{}, ""},
		{"loopback", Config{HTTPAddr: "127.0.0.1:8080", HTTPSAddr: "[::1]:0"}, ""},
		{"no port", Config{HTTPAddr: "localhost"}, `HTTPAddr: "localhost": want host:port`},
		{"bad port", Config{HTTPSAddr: ":https"}, `HTTPSAddr: ":https": port "https" is not a number`},
		{"port out of range", Config{HTTPAddr: ":70000"}, `HTTPAddr: ":70000"`},
	} {
		c, err := tc.cfg.validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && (c.HTTPAddr == "" || c.HTTPSAddr == "" || c.Logger == nil):
			t.Errorf("%s: defaults not filled: %+v", tc.name, c)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		}
	}
	if c, _ := (Config{}).validate(); c.HTTPAddr != ":80" || c.HTTPSAddr != ":443" {
		t.Errorf("default addresses %q %q, want :80 :443", c.HTTPAddr, c.HTTPSAddr)
	}
}

func TestStartNamesBusyAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	c, err := New(Config{HTTPAddr: "127.0.0.1:0", HTTPSAddr: busy.Addr().String(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Start()
	if want := "ingress: listen on HTTPSAddr " + busy.Addr().String(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Start: %v, want an error starting %q", err, want)
	}
}

func TestCloseEndsUpgradedConnections(t *testing.T) {
	c, err := New(Config{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	upgrader := websocket.Upgrader{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	c.Update(webSnapshot(t, addr(backend)))
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+c.httpAddr.String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	start := time.Now()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > closeTimeout+time.Second {
		t.Errorf("Close took %v", d)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := conn.ReadMessage(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("read after Close: %v, want the connection closed", err)
	}
	if err := c.Start(); err == nil {
		t.Error("Start after Close succeeded")
	}
	if _, err := net.Dial("tcp", c.httpAddr.String()); err == nil {
		t.Error("the HTTP listener still accepts after Close")
	}
}
