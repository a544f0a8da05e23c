package pki

import (
	"regexp"
	"strings"
	"testing"
)

func TestNewBearerToken(t *testing.T) {
	shape := regexp.MustCompile(`^([a-z0-9]{6})\.[a-z0-9]{32}$`)
	seen := map[string]bool{}
	chars := map[rune]bool{}
	for range 200 {
		id, tok, err := NewBearerToken()
		if err != nil {
			t.Fatalf("NewBearerToken: %v", err)
		}
		m := shape.FindStringSubmatch(tok)
		if m == nil || m[1] != id {
			t.Fatalf("token %q (id %q) does not match %s with that id", tok, id, shape)
		}
		gotID, secret, ok := SplitBearer(tok)
		if !ok || gotID != id || id+"."+secret != tok {
			t.Fatalf("SplitBearer(%q) = %q, %q, %v", tok, gotID, secret, ok)
		}
		if seen[tok] {
			t.Fatalf("token %q generated twice", tok)
		}
		seen[tok] = true
		for _, c := range tok {
			chars[c] = true
		}
	}
	// 200 tokens draw 7600 characters: every one of the 36 must appear.
	for _, c := range bearerAlphabet {
		if !chars[c] {
			t.Errorf("character %q never drawn", c)
		}
	}
}

func TestHashBearer(t *testing.T) {
	// SHA-256("abc") from FIPS 180-2.
	if got, want := HashBearer("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("HashBearer(abc) = %s, want %s", got, want)
	}
	_, tok, err := NewBearerToken()
	if err != nil {
		t.Fatal(err)
	}
	h := HashBearer(tok)
	if !BearerMatches(tok, h) {
		t.Error("token does not match its hash")
	}
	for _, bad := range []string{tok[:len(tok)-1], tok + "a", strings.ToUpper(tok), ""} {
		if BearerMatches(bad, h) {
			t.Errorf("%q matches the hash of %q", bad, tok)
		}
	}
	if BearerMatches(tok, strings.ToUpper(h)) {
		t.Error("token matches an upper-case stored hash")
	}
}

func TestSplitBearer(t *testing.T) {
	tests := []struct {
		name, in   string
		id, secret string
		ok         bool
	}{
		{"kubeadm length", "abcdef.0123456789abcdef", "abcdef", "0123456789abcdef", true},
		{"ours", "a1b2c3." + strings.Repeat("x9", 16), "a1b2c3", strings.Repeat("x9", 16), true},
		{"max secret", "abcdef." + strings.Repeat("a", 64), "abcdef", strings.Repeat("a", 64), true},
		{"empty", "", "", "", false},
		{"no dot", "abcdef0123456789abcdef", "", "", false},
		{"short id", "abcde.0123456789abcdef", "", "", false},
		{"long id", "abcdefg.0123456789abcdef", "", "", false},
		{"short secret", "abcdef.0123456789abcde", "", "", false},
		{"long secret", "abcdef." + strings.Repeat("a", 65), "", "", false},
		{"upper case", "ABCDEF.0123456789abcdef", "", "", false},
		{"second dot", "abcdef.0123456789.abcdef", "", "", false},
		{"dash", "abc-ef.0123456789abcdef", "", "", false},
		{"JWT-like", "eyJhbG.eyJzdWIiOiIx.sig", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, secret, ok := SplitBearer(tc.in)
			if id != tc.id || secret != tc.secret || ok != tc.ok {
				t.Errorf("SplitBearer(%q) = %q, %q, %v; want %q, %q, %v", tc.in, id, secret, ok, tc.id, tc.secret, tc.ok)
			}
		})
	}
}
