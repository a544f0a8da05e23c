package stream

import (
	"net/http"
	"strings"
	"testing"
)

func TestCheckForwardStream(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	f, err := checkForwardStream(h("streamType", "data", "port", "8080", "requestID", "3"))
	if err != nil || f.kind != "data" || f.port != 8080 || f.requestID != "3" {
		t.Errorf("a data stream: %+v, %v", f, err)
	}
	for _, c := range []struct {
		name string
		h    http.Header
		want string
	}{
		{"no type", h("port", "80", "requestID", "1"), `stream type ""`},
		{"another type", h("streamType", "stdin", "port", "80", "requestID", "1"), `stream type "stdin"`},
		{"no port", h("streamType", "error", "requestID", "1"), `port ""`},
		{"port 0", h("streamType", "error", "port", "0", "requestID", "1"), `port "0"`},
		{"port too big", h("streamType", "data", "port", "65536", "requestID", "1"), `port "65536"`},
		{"no request ID", h("streamType", "data", "port", "80"), "no requestID header"},
	} {
		if _, err := checkForwardStream(c.h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
