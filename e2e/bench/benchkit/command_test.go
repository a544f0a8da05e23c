package benchkit

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestFlagsParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    Flags
		wantErr string
	}{
		{name: "isle and keep", args: []string{"-isle", "out/isle", "-keep"}, want: Flags{Isle: "out/isle", Keep: true}},
		{name: "isle only", args: []string{"-isle", "out/isle"}, want: Flags{Isle: "out/isle"}},
		{name: "no isle", args: []string{"-keep"}, wantErr: "-isle PATH is required"},
		{name: "an argument", args: []string{"-isle", "out/isle", "extra"}, wantErr: `unexpected arguments ["extra"]`},
		{name: "unknown flag", args: []string{"-isle", "out/isle", "-pods", "3"}, wantErr: "flag provided but not defined: -pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Flags
			fs := f.NewFlagSet("bench")
			fs.SetOutput(io.Discard)
			err := f.Parse(fs, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error with %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if f != tc.want {
				t.Fatalf("Parse(%q) gave %+v, want %+v", tc.args, f, tc.want)
			}
		})
	}
}

func TestFlagsParseHelp(t *testing.T) {
	var f Flags
	fs := f.NewFlagSet("bench")
	fs.SetOutput(io.Discard)
	if err := f.Parse(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(-h) = %v, want flag.ErrHelp", err)
	}
}
