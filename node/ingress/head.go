package ingress

import (
	"net/http"
)

// The fast path parses the headers of requests and responses in place,
// in the buffer of the connection's bufio.Reader, into offsets, so that a
// request costs no allocation. It takes a strict subset of HTTP/1.1, each
// part of which net/http reads the same way: lines end in CRLF, field
// names are tokens followed at once by a colon, values hold no control
// bytes, no line is folded, and Content-Length is one decimal number.
// Whatever falls outside is left to net/http (a request is replayed to
// http.Server, a response read by http.ReadResponse), which accepts it,
// answers it (400, 431) or refuses it as it always did.

// span is a part of a header, as offsets into it.
type span struct{ start, end int }

func (s span) of(b []byte) []byte { return b[s.start:s.end] }

// fieldKind is what the fast path does with a header field, by its name.
type fieldKind uint8

const (
	kindOther            fieldKind = iota
	kindHop                        // hop-by-hop (RFC 9110, 7.6.1): not passed on
	kindConnection                 // hop-by-hop, and names more such fields
	kindTE                         // hop-by-hop, but "trailers" is passed on
	kindContentLength              // written as the framing needs
	kindTransferEncoding           // not on the fast path
	kindUpgrade                    // not on the fast path
	kindExpect                     // not on the fast path
	kindTrailer                    // not on the fast path
	kindHost
	kindPragma
	kindCacheControl
	kindDate
	kindXForwardedFor // set by the proxy, appended to the client's
	kindXForwarded    // X-Forwarded-Host, -Proto and -Port and X-Real-IP: set by the proxy
)

// maxKindName is the longest name kindOf knows.
const maxKindName = len("proxy-authorization")

// kindOf returns the kind of a field name (a token).
func kindOf(name []byte) fieldKind {
	if len(name) > maxKindName {
		return kindOther
	}
	var buf [maxKindName]byte
	lower := buf[:len(name)]
	for i, c := range name {
		lower[i] = toLowerASCII(c)
	}
	switch string(lower) {
	case "connection":
		return kindConnection
	case "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization":
		return kindHop
	case "te":
		return kindTE
	case "trailer":
		return kindTrailer
	case "transfer-encoding":
		return kindTransferEncoding
	case "upgrade":
		return kindUpgrade
	case "content-length":
		return kindContentLength
	case "expect":
		return kindExpect
	case "host":
		return kindHost
	case "pragma":
		return kindPragma
	case "cache-control":
		return kindCacheControl
	case "date":
		return kindDate
	case "x-forwarded-for":
		return kindXForwardedFor
	case "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port", "x-real-ip":
		return kindXForwarded
	}
	return kindOther
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equalFoldASCII says whether a and b are equal but for the case of
// ASCII letters (http.CanonicalHeaderKey changes only those).
func equalFoldASCII(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if toLowerASCII(a[i]) != toLowerASCII(b[i]) {
			return false
		}
	}
	return true
}

// isTokenByte says whether c may be in a token (RFC 9110, 5.6.2): a
// method or a field name.
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// isValueByte says whether c may be in a field value as net/textproto
// reads it: visible ASCII, space, tab and obs-text.
func isValueByte(c byte) bool {
	return c == '\t' || c >= ' ' && c != 0x7f
}

// trimOWS removes spaces and tabs around b.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// headerLine returns the line of buf that begins at off, without its
// CRLF, and the offset of the next line. ok is false if the line is not
// complete yet; bad is true if it ends in a bare LF or holds a CR.
func headerLine(buf []byte, off int) (line span, next int, ok, bad bool) {
	for i := off; i < len(buf); i++ {
		switch buf[i] {
		case '\n':
			return span{}, 0, false, true // LF without CR
		case '\r':
			if i+1 == len(buf) {
				return span{}, 0, false, false
			}
			if buf[i+1] != '\n' {
				return span{}, 0, false, true
			}
			return span{off, i}, i + 2, true, false
		}
	}
	return span{}, 0, false, false
}

// field is one header field: its name and its value without the
// whitespace around it.
type field struct {
	kind        fieldKind
	name, value span
}

// parseField parses a header field line of buf. ok is false if the line
// is outside the fast path's subset.
func parseField(buf []byte, line span) (f field, ok bool) {
	b := line.of(buf)
	i := 0
	for i < len(b) && isTokenByte(b[i]) {
		i++
	}
	if i == 0 || i == len(b) || b[i] != ':' {
		return field{}, false // also a folded line, which begins with a space
	}
	for _, c := range b[i+1:] {
		if !isValueByte(c) {
			return field{}, false
		}
	}
	vstart, vend := line.start+i+1, line.end
	for vstart < vend && (buf[vstart] == ' ' || buf[vstart] == '\t') {
		vstart++
	}
	for vend > vstart && (buf[vend-1] == ' ' || buf[vend-1] == '\t') {
		vend--
	}
	name := span{line.start, line.start + i}
	return field{kind: kindOf(name.of(buf)), name: name, value: span{vstart, vend}}, true
}

// parseLength parses a Content-Length value as net/http does, or says
// false if it is not a number of at most max.
func parseLength(b []byte, max int64) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int64(c-'0'); n > max {
			return 0, false
		}
	}
	return n, true
}

// hasTokenBytes says whether the comma-separated list b has the element
// token (in lower case), compared case-insensitively.
func hasTokenBytes(b []byte, token string) bool {
	for len(b) > 0 {
		elem := b
		if i := indexByte(b, ','); i >= 0 {
			elem, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if equalFoldASCII(trimOWS(elem), []byte(token)) {
			return true
		}
	}
	return false
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// fieldList is the fields of a header, in order.
type fieldList struct {
	fields []field
	conns  int // how many are Connection fields
}

// maxKeptFields bounds the fields a connection keeps room for between
// requests: a header of unusually many fields does not hold its memory
// for the connection's life.
const maxKeptFields = 64

func (l *fieldList) reset() {
	if cap(l.fields) > maxKeptFields {
		l.fields = nil
	}
	l.fields = l.fields[:0]
	l.conns = 0
}

func (l *fieldList) add(f field) {
	if f.kind == kindConnection {
		l.conns++
	}
	l.fields = append(l.fields, f)
}

// named says whether a Connection field of the header buf names the field
// name, which is then of the connection too.
func (l *fieldList) named(buf []byte, name []byte) bool {
	if l.conns == 0 {
		return false
	}
	for _, f := range l.fields {
		if f.kind != kindConnection {
			continue
		}
		v := f.value.of(buf)
		for len(v) > 0 {
			elem := v
			if i := indexByte(v, ','); i >= 0 {
				elem, v = v[:i], v[i+1:]
			} else {
				v = nil
			}
			if equalFoldASCII(trimOWS(elem), name) {
				return true
			}
		}
	}
	return false
}

// passed says whether the field f of the header buf goes on to the next
// hop: it is end-to-end and no Connection field names it.
func (l *fieldList) passed(buf []byte, f field) bool {
	switch f.kind {
	case kindHop, kindConnection, kindTE, kindContentLength, kindTransferEncoding, kindUpgrade, kindTrailer:
		return false
	}
	return !l.named(buf, f.name.of(buf))
}

// reqHead is the header of a request that the fast path serves, parsed
// in place: the spans are offsets into the connection's buffer.
type reqHead struct {
	next      int // offset of the first line not parsed yet
	size      int // the whole header's, once parsed
	method    string
	target    span
	path      span   // of target, before the query
	escaped   bool   // path has %-escapes
	unescaped []byte // path without them, if escaped
	host      span
	hosts     int
	length    int64 // of the body
	consumed  bool  // the header was taken from the buffer
	bodyLeft  int64 // bytes of the body not taken yet, once consumed
	close     bool  // Connection: close
	pragma    bool  // the first Pragma is "no-cache" (net/http adds Cache-Control then)
	pragmas   int
	cacheCtrl bool // has a Cache-Control field
	fieldList
}

// reset prepares h for the next request.
func (h *reqHead) reset() {
	fields, unescaped := h.fieldList, h.unescaped[:0]
	if cap(unescaped) > 1<<10 {
		unescaped = nil
	}
	fields.reset()
	*h = reqHead{fieldList: fields, unescaped: unescaped}
}

// headState is where the parsing of a header stands.
type headState int

const (
	headMore  headState = iota // incomplete: read more
	headDone                   // parsed, for the fast path
	headLeave                  // for net/http
)

// parse goes on parsing the request header at the start of buf, which is
// all that is buffered; more is appended to buf between calls.
func (h *reqHead) parse(buf []byte) headState {
	for {
		line, next, ok, bad := headerLine(buf, h.next)
		if bad {
			return headLeave
		}
		if !ok {
			return headMore
		}
		first := h.next == 0
		h.next = next
		switch {
		case first:
			if !h.requestLine(buf, line) {
				return headLeave
			}
		case line.start == line.end:
			h.size = next
			return h.done(buf)
		default:
			f, ok := parseField(buf, line)
			if !ok || !h.field(buf, f) {
				return headLeave
			}
		}
	}
}

// requestLine parses "METHOD /target HTTP/1.1".
func (h *reqHead) requestLine(buf []byte, line span) bool {
	b := line.of(buf)
	m := 0
	for m < len(b) && isTokenByte(b[m]) {
		m++
	}
	if m == 0 || m == len(b) || b[m] != ' ' {
		return false
	}
	t := m + 1
	end := t
	for end < len(b) && b[end] != ' ' {
		c := b[end]
		if c < ' ' || c == 0x7f {
			return false // net/url refuses control bytes
		}
		if c == '%' && h.path.end == 0 {
			h.escaped = true
		}
		if c == '?' && h.path.end == 0 {
			h.path = span{line.start + t, line.start + end}
		}
		end++
	}
	if end == t || b[t] != '/' || string(b[end:]) != " HTTP/1.1" {
		return false
	}
	h.method = methodString(b[:m])
	if h.method == http.MethodConnect {
		return false
	}
	h.target = span{line.start + t, line.start + end}
	if h.path.end == 0 {
		h.path = h.target
	}
	return true
}

// field takes a header field, or says false if the request is not for
// the fast path.
func (h *reqHead) field(buf []byte, f field) bool {
	v := f.value.of(buf)
	switch f.kind {
	case kindTransferEncoding, kindUpgrade, kindExpect, kindTrailer:
		return false
	case kindHost:
		if h.hosts++; h.hosts > 1 {
			return false
		}
		h.host = f.value
	case kindContentLength:
		if h.hasField(kindContentLength) {
			return false // net/http takes equal ones as one, and refuses others
		}
		n, ok := parseLength(v, maxFastBody)
		if !ok {
			return false
		}
		h.length = n
	case kindConnection:
		h.close = h.close || hasTokenBytes(v, "close")
	case kindPragma:
		if h.pragmas++; h.pragmas == 1 {
			h.pragma = string(v) == "no-cache"
		}
	case kindCacheControl:
		h.cacheCtrl = true
	}
	h.add(f)
	return true
}

// hasField says whether h has a field of kind k.
func (h *reqHead) hasField(k fieldKind) bool {
	for _, f := range h.fields {
		if f.kind == k {
			return true
		}
	}
	return false
}

// done checks the parsed header as a whole.
func (h *reqHead) done(buf []byte) headState {
	if h.hosts != 1 || !validHost(h.host.of(buf)) {
		return headLeave // http.Server answers 400
	}
	if h.escaped {
		var ok bool
		if h.unescaped, ok = unescapePath(h.unescaped[:0], h.path.of(buf)); !ok {
			return headLeave
		}
	}
	return headDone
}

// routePath returns the request's path as routes match it: unescaped.
func (h *reqHead) routePath(buf []byte) []byte {
	if h.escaped {
		return h.unescaped
	}
	return h.path.of(buf)
}

// validHost says whether a Host value is not empty and is made of the
// bytes a host, an IP literal and a port are written with (RFC 3986, 3.2).
func validHost(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			continue
		}
		switch c {
		case '-', '.', '_', '~', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '[', ']', '%':
			continue
		}
		return false
	}
	return true
}

// methodString returns a method as a string, without allocating for the
// common ones.
func methodString(b []byte) string {
	switch string(b) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodPatch:
		return http.MethodPatch
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodOptions:
		return http.MethodOptions
	case http.MethodConnect:
		return http.MethodConnect
	}
	return string(b)
}

// unescapePath appends the %-unescaped path p to dst as net/url does for
// a request's path, or says false if an escape is malformed.
func unescapePath(dst, p []byte) ([]byte, bool) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' {
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return dst, false
			}
			c = unhex(p[i+1])<<4 | unhex(p[i+2])
			i += 2
		}
		dst = append(dst, c)
	}
	return dst, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// respHead is the header of an endpoint's response that the fast path
// copies, parsed in place in the endpoint connection's buffer.
type respHead struct {
	size   int // the whole header's
	status int
	length int64 // Content-Length; -1 if none
	close  bool  // Connection: close
	fieldList
}

// parse parses the response header at the start of buf, complete or not,
// to a request of method.
func (h *respHead) parse(buf []byte, method string) headState {
	h.fieldList.reset()
	h.length, h.close = -1, false
	line, next, ok, bad := headerLine(buf, 0)
	if bad {
		return headLeave
	}
	if !ok {
		return headMore
	}
	if !h.statusLine(line.of(buf)) {
		return headLeave
	}
	for {
		line, next, ok, bad = headerLine(buf, next)
		if bad {
			return headLeave
		}
		if !ok {
			return headMore
		}
		if line.start == line.end {
			h.size = next
			break
		}
		f, ok := parseField(buf, line)
		if !ok {
			return headLeave
		}
		v := f.value.of(buf)
		switch f.kind {
		case kindTransferEncoding, kindTrailer:
			return headLeave // chunked, or trailers to announce: http.ReadResponse reads them
		case kindContentLength:
			if h.length >= 0 {
				return headLeave
			}
			n, ok := parseLength(v, 1<<62)
			if !ok {
				return headLeave
			}
			h.length = n
		case kindConnection:
			h.close = h.close || hasTokenBytes(v, "close")
		}
		h.add(f)
	}
	if h.length < 0 && method != http.MethodHead && h.status != http.StatusNoContent && h.status != http.StatusNotModified {
		return headLeave // the body ends with the connection
	}
	return headDone
}

// statusLine parses "HTTP/1.1 200 reason" of a final status.
func (h *respHead) statusLine(b []byte) bool {
	const proto = "HTTP/1.1 "
	if len(b) < len(proto)+3 || string(b[:len(proto)]) != proto || len(b) > len(proto)+3 && b[len(proto)+3] != ' ' {
		return false
	}
	code := 0
	for _, c := range b[len(proto) : len(proto)+3] {
		if c < '0' || c > '9' {
			return false
		}
		code = code*10 + int(c-'0')
	}
	for _, c := range b[len(proto)+3:] {
		if !isValueByte(c) {
			return false
		}
	}
	h.status = code
	return code >= 200 && code <= 599
}

// bodiless says whether the response to a request of method has no body.
func (h *respHead) bodiless(method string) bool {
	return method == http.MethodHead || h.status == http.StatusNoContent || h.status == http.StatusNotModified
}
