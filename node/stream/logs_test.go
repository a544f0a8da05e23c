package stream

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/isle-cluster/isle/node/logs"
)

var logEpoch = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// writeContainerLog writes lines (stream:text) with one-second steps from start.
func writeContainerLog(t *testing.T, path string, start time.Time, lines ...string) {
	t.Helper()
	n := 0
	w, err := logs.NewWriter(path, 1<<20, 2, func() time.Time {
		n++
		return start.Add(time.Duration(n) * time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		stream, text, _ := strings.Cut(l, ":")
		if _, err := io.WriteString(w.Stream(stream), text+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

func TestContainerLogs(t *testing.T) {
	dir := t.TempDir()
	current, previous, recent := filepath.Join(dir, "1.log"), filepath.Join(dir, "0.log"), filepath.Join(dir, "recent.log")
	writeContainerLog(t, current, logEpoch, "stdout:one", "stderr:two", "stdout:three")
	writeContainerLog(t, previous, logEpoch.Add(-time.Hour), "stdout:before the restart")
	writeContainerLog(t, recent, time.Now().Add(-time.Hour), "stdout:an hour ago")
	writeContainerLog(t, recent+".new", time.Now().Add(-5*time.Second), "stdout:just now")
	if err := os.Rename(recent, recent+".1"); err != nil { // an older file of recent.log
		t.Fatal(err)
	}
	if err := os.Rename(recent+".new", recent); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, fakePods{
		"ns/web/app":     {LogPath: current, PreviousLogPath: previous},
		"ns/web/fresh":   {LogPath: current},
		"ns/web/waiting": {},
		"ns/web/lost":    {LogPath: filepath.Join(dir, "gone.log")},
		"ns/web/recent":  {LogPath: recent},
	})
	stamp := func(n int) string { return logEpoch.Add(time.Duration(n)*time.Second).Format(time.RFC3339Nano) + " " }
	tests := []struct {
		name   string
		path   string
		status int
		want   string
	}{
		{"all", "/containerLogs/ns/web/app", 200, "one\ntwo\nthree\n"},
		{"tail and timestamps", "/containerLogs/ns/web/app?tailLines=2&timestamps=true", 200, stamp(2) + "two\n" + stamp(3) + "three\n"},
		{"stderr", "/containerLogs/ns/web/app?stream=Stderr", 200, "two\n"},
		{"all streams", "/containerLogs/ns/web/app?stream=All&tailLines=1", 200, "three\n"},
		{"limit bytes", "/containerLogs/ns/web/app?limitBytes=6", 200, "one\ntw"},
		{"since time", "/containerLogs/ns/web/app?sinceTime=" + logEpoch.Add(2*time.Second).Format(time.RFC3339), 200, "two\nthree\n"},
		{"since seconds", "/containerLogs/ns/web/recent?sinceSeconds=60", 200, "just now\n"},
		{"previous", "/containerLogs/ns/web/app?previous=true", 200, "before the restart\n"},
		{"follow a stopped container", "/containerLogs/ns/web/app?follow=true&tailLines=1", 200, "three\n"},
		{"no previous", "/containerLogs/ns/web/fresh?previous=true", 400, `previous terminated container "fresh" in pod "web" not found`},
		{"not started", "/containerLogs/ns/web/waiting", 400, "has not started"},
		{"no such pod", "/containerLogs/ns/db/app", 404, "not found"},
		{"log file gone", "/containerLogs/ns/web/lost", 404, "gone.log: no such file"},
		{"bad tail", "/containerLogs/ns/web/app?tailLines=-1", 400, `tailLines="-1": want an integer >= 0`},
		{"bad limit", "/containerLogs/ns/web/app?limitBytes=0", 400, `limitBytes="0"`},
		{"bad since seconds", "/containerLogs/ns/web/app?sinceSeconds=soon", 400, `sinceSeconds="soon"`},
		{"bad since time", "/containerLogs/ns/web/app?sinceTime=yesterday", 400, `sinceTime="yesterday": want an RFC 3339 time`},
		{"both since", "/containerLogs/ns/web/app?sinceSeconds=5&sinceTime=" + logEpoch.Format(time.RFC3339), 400, "not both"},
		{"bad stream", "/containerLogs/ns/web/app?stream=stdin", 400, `stream="stdin"`},
		{"bad follow", "/containerLogs/ns/web/app?follow=yes", 400, `follow="yes"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, header := get(t, srv.URL+tc.path)
			if status != tc.status {
				t.Errorf("status %d (%q), want %d", status, body, tc.status)
			}
			if status == 200 && (body != tc.want || header.Get("Content-Type") != "text/plain") {
				t.Errorf("body %q (%s), want %q (text/plain)", body, header.Get("Content-Type"), tc.want)
			}
			if status != 200 && !strings.Contains(body, tc.want) {
				t.Errorf("body %q, want it to contain %q", body, tc.want)
			}
		})
	}
}

func TestContainerLogsFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w, err := logs.NewWriter(path, 1<<20, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	var alive atomic.Bool
	alive.Store(true)
	srv := newTestServer(t, fakePods{"ns/web/app": {LogPath: path, Running: alive.Load}})

	// The header comes before any line, and each line as it is written.
	resp, err := http.Get(srv.URL + "/containerLogs/ns/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	body := bufio.NewReader(resp.Body)
	for i := range 3 {
		want := fmt.Sprintf("line %d\n", i)
		if _, err := io.WriteString(w.Stream(logs.Stdout), want); err != nil {
			t.Fatal(err)
		}
		if got, err := body.ReadString('\n'); got != want || err != nil {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
	}
	if _, err := io.WriteString(w.Stream(logs.Stderr), "exiting"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	alive.Store(false)
	rest, err := io.ReadAll(body)
	if err != nil || string(rest) != "exiting" {
		t.Errorf("end of the log %q (%v), want %q and the end", rest, err, "exiting")
	}
}

// Logs over a WebSocket, as the API server serves them to clients that ask
// (the conformance suite): the log in binary messages, or base64 text
// with base64.binary.k8s.io, then a normal close.
func TestContainerLogsWebSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "1.log")
	writeContainerLog(t, path, logEpoch, "stdout:container is alive", "stderr:and well")
	srv := newTestServer(t, fakePods{"ns/web/app": {LogPath: path}})
	for _, tc := range []struct{ protocol, selected, want string }{
		{"binary.k8s.io", "binary.k8s.io", "container is alive\nand well\n"},
		{"", "", "container is alive\nand well\n"},
		{"base64.binary.k8s.io", "base64.binary.k8s.io", base64.StdEncoding.EncodeToString([]byte("container is alive\nand well\n"))},
	} {
		t.Run("protocol "+tc.protocol, func(t *testing.T) {
			got, selected := wsMessages(t, srv, "/containerLogs/ns/web/app", tc.protocol)
			typ := websocket.BinaryMessage
			if tc.protocol == "base64.binary.k8s.io" {
				typ = websocket.TextMessage
			}
			var all strings.Builder
			for _, m := range got {
				if m.typ != typ {
					t.Errorf("message %q of type %d, want %d", m.data, m.typ, typ)
				}
				all.WriteString(m.data)
			}
			if selected != tc.selected || all.String() != tc.want {
				t.Errorf("protocol %q, log %q; want %q, %q", selected, all.String(), tc.selected, tc.want)
			}
		})
	}
}
