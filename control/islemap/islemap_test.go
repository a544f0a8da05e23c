package islemap

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"strings"
	"testing"
)

// maxEmbedded is the limit on the map's embedded files.
const maxEmbedded = 1536 << 10 // 1.5 MiB

// serve makes one request of h and returns its recorded response.
func serve(t *testing.T, h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// webFiles are the names of the files in web/, as the package's source
// tree holds them.
func webFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("web")
	if err != nil {
		t.Fatalf("read web/: %v", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("web/%s is a directory; the map's files are flat", e.Name())
			continue
		}
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		t.Fatal("web/ holds no files")
	}
	return names
}

func TestFilesIndex(t *testing.T) {
	h := Files()
	for _, target := range []string{Path, Path + "index.html"} {
		t.Run(target, func(t *testing.T) {
			w := serve(t, h, http.MethodGet, target, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s: status %d, want 200: %s", target, w.Code, w.Body)
			}
			if got, want := w.Header().Get("Content-Type"), "text/html; charset=utf-8"; got != want {
				t.Errorf("Content-Type %q, want %q", got, want)
			}
			if got := w.Header().Get("Content-Encoding"); got != "" {
				t.Errorf("Content-Encoding %q without Accept-Encoding, want none", got)
			}
			if !strings.Contains(w.Body.String(), `<main id="island">`) {
				t.Errorf("GET %s: body lacks <main id=\"island\">:\n%.300s", target, w.Body)
			}
		})
	}
	// Path and Path+"index.html" are the same file.
	a := serve(t, h, http.MethodGet, Path, nil)
	b := serve(t, h, http.MethodGet, Path+"index.html", nil)
	if a.Header().Get("ETag") != b.Header().Get("ETag") || !bytes.Equal(a.Body.Bytes(), b.Body.Bytes()) {
		t.Errorf("GET %s and GET %sindex.html differ", Path, Path)
	}
}

func TestFilesEveryEmbeddedFile(t *testing.T) {
	want := map[string]string{
		".html": "text/html; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".svg":  "image/svg+xml",
		".json": "application/json",
		".png":  "image/png",
	}
	h := Files()
	etags := map[string]string{}
	for _, name := range webFiles(t) {
		t.Run(name, func(t *testing.T) {
			ctype, ok := want[path.Ext(name)]
			if !ok {
				t.Fatalf("web/%s has extension %q, which the map does not serve", name, path.Ext(name))
			}
			if strings.HasPrefix(name, ".") {
				t.Fatalf("web/%s is a dotfile, which the map does not serve", name)
			}
			w := serve(t, h, http.MethodGet, Path+name, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s%s: status %d, want 200", Path, name, w.Code)
			}
			if got := w.Header().Get("Content-Type"); got != ctype {
				t.Errorf("Content-Type %q, want %q", got, ctype)
			}
			if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if got := w.Header().Get("Cache-Control"); got != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache", got)
			}
			disk, err := os.ReadFile("web/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Body.Bytes(), disk) {
				t.Errorf("GET %s%s: %d bytes that are not web/%s's %d", Path, name, w.Body.Len(), name, len(disk))
			}
			etag := w.Header().Get("ETag")
			if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
				t.Errorf("ETag %q is not a quoted strong validator", etag)
			}
			if other, dup := etags[etag]; dup {
				t.Errorf("ETag %q of %s is also %s's", etag, name, other)
			}
			etags[etag] = name
		})
	}
}

func TestFilesGzip(t *testing.T) {
	h := Files()
	for _, name := range webFiles(t) {
		t.Run(name, func(t *testing.T) {
			raw := serve(t, h, http.MethodGet, Path+name, nil)
			if raw.Code != http.StatusOK {
				t.Fatalf("GET: status %d", raw.Code)
			}
			if got := raw.Header().Get("Vary"); got != "Accept-Encoding" {
				t.Errorf("Vary %q without gzip, want Accept-Encoding", got)
			}
			w := serve(t, h, http.MethodGet, Path+name, map[string]string{"Accept-Encoding": "br, gzip, deflate"})
			if w.Code != http.StatusOK {
				t.Fatalf("GET with gzip: status %d", w.Code)
			}
			if got := w.Header().Get("Vary"); got != "Accept-Encoding" {
				t.Errorf("Vary %q, want Accept-Encoding", got)
			}
			if got, want := w.Header().Get("ETag"), raw.Header().Get("ETag"); got != want {
				t.Errorf("ETag %q with gzip, %q without", got, want)
			}
			if w.Header().Get("Content-Encoding") != "gzip" {
				// Small files are not worth compressing; the rest are.
				if raw.Body.Len() > 512 && path.Ext(name) != ".png" {
					t.Fatalf("%d bytes of %s not gzipped (Content-Encoding %q)", raw.Body.Len(), name, w.Header().Get("Content-Encoding"))
				}
				if !bytes.Equal(w.Body.Bytes(), raw.Body.Bytes()) {
					t.Errorf("body not gzipped but differs from the raw one")
				}
				return
			}
			if w.Body.Len() >= raw.Body.Len() {
				t.Errorf("gzipped %d bytes, raw %d: not smaller", w.Body.Len(), raw.Body.Len())
			}
			zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
			if err != nil {
				t.Fatalf("gzip body: %v", err)
			}
			got, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("gunzip: %v", err)
			}
			if !bytes.Equal(got, raw.Body.Bytes()) {
				t.Errorf("gunzipped body (%d bytes) differs from the raw body (%d bytes)", len(got), raw.Body.Len())
			}
		})
	}
	// A large file is compressed: main.js is among the map's largest.
	w := serve(t, h, http.MethodGet, Path+"main.js", map[string]string{"Accept-Encoding": "gzip"})
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Errorf("main.js not gzipped when asked")
	}
}

func TestFilesConditional(t *testing.T) {
	h := Files()
	first := serve(t, h, http.MethodGet, Path+"style.css", nil)
	etag := first.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	other := serve(t, h, http.MethodGet, Path+"main.js", nil).Header().Get("ETag")
	tests := []struct {
		name, match string
		want        int
	}{
		{"same etag", etag, http.StatusNotModified},
		{"among others", `"0000", ` + etag, http.StatusNotModified},
		{"weak", "W/" + etag, http.StatusNotModified},
		{"another file's", other, http.StatusOK},
		{"stale", `"deadbeefdeadbeef"`, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, gz := range []string{"", "gzip"} {
				w := serve(t, h, http.MethodGet, Path+"style.css", map[string]string{"If-None-Match": tc.match, "Accept-Encoding": gz})
				if w.Code != tc.want {
					t.Fatalf("If-None-Match %s (Accept-Encoding %q): status %d, want %d", tc.match, gz, w.Code, tc.want)
				}
				if tc.want == http.StatusNotModified {
					if w.Body.Len() != 0 {
						t.Errorf("304 with a %d-byte body", w.Body.Len())
					}
					if got := w.Header().Get("ETag"); got != etag {
						t.Errorf("304 ETag %q, want %q", got, etag)
					}
				} else if w.Body.Len() == 0 {
					t.Errorf("200 with no body")
				}
			}
		})
	}
}

func TestFilesHead(t *testing.T) {
	h := Files()
	for _, gz := range []string{"", "gzip"} {
		get := serve(t, h, http.MethodGet, Path, map[string]string{"Accept-Encoding": gz})
		head := serve(t, h, http.MethodHead, Path, map[string]string{"Accept-Encoding": gz})
		if head.Code != http.StatusOK {
			t.Fatalf("HEAD %s: status %d", Path, head.Code)
		}
		if head.Body.Len() != 0 {
			t.Errorf("HEAD %s (Accept-Encoding %q): %d bytes of body, want none", Path, gz, head.Body.Len())
		}
		for _, k := range []string{"Content-Type", "ETag", "Content-Encoding", "Content-Security-Policy"} {
			if got, want := head.Header().Get(k), get.Header().Get(k); got != want {
				t.Errorf("HEAD %s (Accept-Encoding %q): %s %q, GET's %q", Path, gz, k, got, want)
			}
		}
	}
}

func TestFilesNotFound(t *testing.T) {
	h := Files()
	for _, target := range []string{
		Path + "nothing.js",     // unknown file
		Path + "../x",           // out of the tree
		Path + "../islemap.go",  // out of the tree, a file that exists
		Path + "./index.html",   // not a clean path
		Path + ".hidden",        // dotfile
		Path + ".hidden.js",     // dotfile with a served extension
		Path + "index.txt",      // unknown extension
		Path + "index.html.bak", // unknown extension
		Path + "index",          // no extension
		Path + "status",         // the status is the API server's, not a file
		Path + "index.html/",    // a directory name
		Path + "sub/main.js",    // no such directory
		"/other/index.html",     // not under Path
	} {
		t.Run(target, func(t *testing.T) {
			w := serve(t, h, http.MethodGet, target, nil)
			if w.Code != http.StatusNotFound {
				t.Errorf("GET %s: status %d, want 404", target, w.Code)
			}
			if ct := w.Header().Get("Content-Type"); strings.HasPrefix(ct, "text/html") || strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("GET %s: 404 with Content-Type %q", target, ct)
			}
			if w.Header().Get("ETag") != "" {
				t.Errorf("GET %s: 404 with an ETag", target)
			}
		})
	}
}

func TestFilesMethods(t *testing.T) {
	h := Files()
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		t.Run(method, func(t *testing.T) {
			w := serve(t, h, method, Path+"index.html", nil)
			if w.Code != http.StatusMethodNotAllowed {
				t.Fatalf("%s: status %d, want 405", method, w.Code)
			}
			if got := w.Header().Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s: Allow %q, want \"GET, HEAD\"", method, got)
			}
			if strings.Contains(w.Body.String(), `<main id="island">`) {
				t.Errorf("%s: answered with the page", method)
			}
		})
	}
}

func TestFilesSecurityHeaders(t *testing.T) {
	h := Files()
	for _, name := range []string{"", "index.html", "main.js", "style.css", "icons.svg"} {
		w := serve(t, h, http.MethodGet, Path+name, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s%s: status %d", Path, name, w.Code)
		}
		csp := w.Header().Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "style-src 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s%s: Content-Security-Policy %q lacks %q", Path, name, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "*") {
			t.Errorf("GET %s%s: Content-Security-Policy %q allows more than the map's own files", Path, name, csp)
		}
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s%s: X-Content-Type-Options %q", Path, name, got)
		}
	}
}

// TestFilesSize holds the embedded map to the limit: everything
// served, summed, is at most 1.5 MiB.
func TestFilesSize(t *testing.T) {
	h := Files()
	total := 0
	for _, name := range webFiles(t) {
		w := serve(t, h, http.MethodGet, Path+name, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s%s: status %d", Path, name, w.Code)
		}
		total += w.Body.Len()
	}
	// Files not served still weigh on the binary: count the embedded tree.
	embedded := 0
	entries, err := web.ReadDir("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		embedded += int(info.Size())
	}
	if embedded < total {
		t.Errorf("the embedded tree is %d bytes, less than the %d served", embedded, total)
	}
	if embedded > maxEmbedded {
		t.Errorf("the map's embedded files are %d bytes, over the limit of %d", embedded, maxEmbedded)
	}
	t.Logf("the map's embedded files: %d bytes of %d", embedded, maxEmbedded)
}
