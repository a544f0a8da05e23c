package firstboot

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// tokenComment replaces the token's lines in isle.yaml.
const tokenComment = "# token: moved to " + ConfigFile + " (readable by root only)"

// RemoveToken rewrites path, the isle.yaml c was parsed from, with the
// token's lines replaced by a comment saying where it went, every other
// line kept. It does nothing when c has no token. The FAT partition has no
// atomic rename worth much, so it writes path.tmp, syncs it, renames it
// and syncs the directory: a power cut leaves the old or the new file, or
// at worst both.
func RemoveToken(path string, c *Config) error {
	if c.withoutToken == nil {
		return nil
	}
	if err := writeFile(path, c.withoutToken, 0o600); err != nil {
		return fmt.Errorf("firstboot: move the token off %s: %w", path, err)
	}
	return nil
}

// removeTokenLines returns isle.yaml's text data with the lines of the
// token (key k, a key of the top-level block mapping) replaced by
// tokenComment. The token's value is one scalar, on the key's line or
// below it, possibly on several lines (quoted, or a block scalar): those
// lines follow it indented deeper than the key, and are not comments (a
// token has no '#'). It checks that the result holds every other setting
// as data does, and fails when it would not.
func removeTokenLines(data []byte, k *yaml.Node) ([]byte, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	first := k.Line - 1
	if first < 0 || first >= len(lines) {
		return nil, fmt.Errorf("line %d is not in the file", k.Line)
	}
	last := first
	for i := first + 1; i < len(lines); i++ {
		text := bytes.TrimRight(lines[i], "\r\n")
		rest := bytes.TrimLeft(text, " ")
		switch indent := len(text) - len(rest); {
		case len(bytes.TrimSpace(rest)) == 0:
			continue // blank: the token's if a line of it follows
		case indent >= k.Column && rest[0] != '#':
			last = i
			continue
		}
		break
	}
	ending := "\n"
	if !bytes.HasSuffix(lines[last], []byte("\n")) {
		ending = ""
	} else if bytes.HasSuffix(lines[last], []byte("\r\n")) {
		ending = "\r\n" // a file written on Windows stays so
	}
	var out bytes.Buffer
	for _, l := range lines[:first] {
		out.Write(l)
	}
	out.Write(bytes.Repeat([]byte(" "), k.Column-1))
	out.WriteString(tokenComment + ending)
	for _, l := range lines[last+1:] {
		out.Write(l)
	}
	if err := sameWithoutToken(data, out.Bytes()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// sameWithoutToken checks that isle.yaml's text edited holds the settings
// of orig but the token.
func sameWithoutToken(orig, edited []byte) error {
	var want, got map[string]any
	if err := yaml.Unmarshal(orig, &want); err != nil {
		return fmt.Errorf("reread: %w", err)
	}
	delete(want, "token")
	err := yaml.Unmarshal(edited, &got)
	if got == nil {
		got = map[string]any{} // only comments are left
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		return errors.New("cannot be moved off the file line by line (the other settings would change): write it on one line, as token: ISLE1::<CA hash>::<secret>")
	}
	return nil
}
