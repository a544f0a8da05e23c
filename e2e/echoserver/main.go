// Command echoserver is the backend of the end-to-end traffic tests, run
// in pods: it answers every request with who served it and what arrived,
// echoes WebSocket messages, and lets a test turn its readiness off.
//
//	GET  /any/path     {"host": POD NAME, "path": "/any/path", "remote": CLIENT ADDRESS, "header": {...}}
//	GET  /ready        200 while ready, 503 after POST /ready/off
//	POST /ready/off    readiness probes fail from now on
//	GET  /ws           WebSocket: every message is sent back
//
// It listens on :$PORT (8080).
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Answer is the body of every plain request.
type Answer struct {
	Host   string      `json:"host"`
	Path   string      `json:"path"`
	Remote string      `json:"remote"` // host:port the connection came from
	Header http.Header `json:"header"`
}

func main() {
	host, _ := os.Hostname()
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	var unready atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Answer{Host: host, Path: r.URL.Path, Remote: r.RemoteAddr, Header: r.Header})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		if unready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("POST /ready/off", func(w http.ResponseWriter, r *http.Request) {
		unready.Store(true)
		w.Write([]byte("readiness off\n"))
	})
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return // the upgrader answered the client
		}
		defer c.Close()
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(typ, append([]byte(host+": "), msg...)); err != nil {
				return
			}
		}
	})
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
